package mcp

import (
	"context"
	"net/http"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/mcp/fastpath"
)

// fastBackend is what the fast path (mcp/fastpath) answers from: the same
// queries and result values as the SDK's handlers here.
type fastBackend struct{ s *Server }

var _ fastpath.Backend = fastBackend{}

func (b fastBackend) WithCaller(ctx context.Context, h http.Header) context.Context {
	if b.s.o.CallerOf == nil {
		return ctx
	}
	return context.WithValue(ctx, callerKey{}, b.s.o.CallerOf(h))
}

func (b fastBackend) Filter(ctx context.Context) catalog.Filter { return callerFrom(ctx).Filter }

func (b fastBackend) Page(cursor string) (*catalog.Catalog, int, error) { return b.s.page(cursor) }

func (b fastBackend) Current() *catalog.Catalog { return b.s.o.Catalogs.Current() }

func (b fastBackend) Head(ctx context.Context) any {
	return resultHead{ResultBase: b.s.resultBase(), CacheHints: b.s.modernHints(ctx)}
}

func (b fastBackend) Provable(ctx context.Context, refs []catalog.Ref) []bool {
	return b.s.provable(ctx, refs)
}

// ReadResult reads quietly: an error is left to the SDK's path, which
// logs it.
func (b fastBackend) ReadResult(ctx context.Context, uri string, modern bool) (any, error) {
	c, err := b.s.readSkillFile(ctx, uri, true)
	if err != nil {
		return nil, err
	}
	res := &readResourceResult{Contents: []*resourceContents{c}}
	if modern {
		res.ResultBase, res.CacheHints = b.s.resultBase(), b.s.modernHints(ctx)
	}
	return res, nil
}
