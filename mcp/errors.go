package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/proof"
)

// JSON-RPC error codes skillreg answers with.
const (
	codeInvalidParams = -32602
	codeInternal      = -32603
)

var errNotFoundPrompt = &jsonrpc.Error{Code: codeInvalidParams, Message: "prompt not found"}

// rpcError maps an error of a catalog query to its JSON-RPC error, in this
// one place: what the client got wrong is -32602 (with the URI in data when
// there is one), everything else -32603 without internal detail.
func rpcError(err error, uri string) error {
	var data json.RawMessage
	if uri != "" {
		data, _ = json.Marshal(map[string]string{"uri": uri})
	}
	switch {
	case errors.Is(err, catalog.ErrBadURI):
		return &jsonrpc.Error{Code: codeInvalidParams, Message: err.Error(), Data: data}
	case errors.Is(err, catalog.ErrNotFound):
		return &jsonrpc.Error{Code: codeInvalidParams, Message: "Resource not found", Data: data}
	case errors.Is(err, catalog.ErrNotDirectory):
		return &jsonrpc.Error{Code: codeInvalidParams, Message: "not a directory of a served skill", Data: data}
	case errors.Is(err, proof.ErrTooLarge):
		return &jsonrpc.Error{Code: codeInvalidParams, Message: fmt.Sprintf("no proof: it would be larger than %d bytes (diagnose lists the skills without one)", proof.MaxBytes), Data: data}
	case errors.Is(err, catalog.ErrBadCursor):
		return &jsonrpc.Error{Code: codeInvalidParams, Message: "invalid cursor"}
	case errors.Is(err, catalog.ErrCatalogMoved):
		return &jsonrpc.Error{Code: codeInvalidParams, Message: "catalog changed, list again"}
	case errors.Is(err, catalog.ErrChanged):
		return &jsonrpc.Error{Code: codeInternal, Message: "file changed since it was indexed; the catalog is being refreshed, fetch the entry again", Data: data}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &jsonrpc.Error{Code: codeInternal, Message: "request cancelled"}
	}
	return &jsonrpc.Error{Code: codeInternal, Message: "internal error", Data: data}
}

func invalidParams(msg string) error { return &jsonrpc.Error{Code: codeInvalidParams, Message: msg} }

func errorsIsAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
