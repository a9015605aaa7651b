package webhook

import (
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/skillreg/skillreg/peers"
)

// Relay sends a delivery from GitHub to the peers (peers.Relay): in the
// background, so Send returns at once; body is the caller's until Send
// returns.
type Relay interface {
	Send(event, delivery, contentType string, body []byte)
}

// The outcomes of relays only, besides the delivery outcomes a relay
// applied gets.
const (
	OutcomeSelf      = peers.OutcomeSelf // 200: a relay from this replica's own instance id, not applied
	OutcomeDuplicate = "duplicate"       // 200: a relay of a delivery id this replica has already handled, not applied again
	OutcomeNoID      = "no_delivery_id"  // 400: a relay without X-GitHub-Delivery (it could not be applied once only)
)

var errNoDeliveryID = errors.New("relay without a delivery id")

// isRelay reports whether r claims to be a relay from a peer: either
// relay header makes it one, so that a relay is never checked against the
// webhook secrets (and a half-relay is refused, not taken for GitHub's).
func isRelay(r *http.Request) bool {
	return r.Header.Get(peers.HeaderSignature) != "" || r.Header.Get(peers.HeaderFrom) != ""
}

// handleRelay takes a delivery a peer relayed: its signature is checked
// against the peer secrets before anything else (and before the body is
// read when it is ill-formed); a relay from this replica's own instance id
// is answered OutcomeSelf and not applied; one of a delivery id already
// handled (the delivery log, or in flight now) is answered
// OutcomeDuplicate and not applied again. Any other is applied as a
// delivery from GitHub would be, recorded in the delivery log, and never
// relayed again. Every answer to a relay carries peers.HeaderOutcome.
func (h *Handler) handleRelay(c echo.Context, start time.Time, event, id string) error {
	req := c.Request()
	from := req.Header.Get(peers.HeaderFrom)
	sig := req.Header.Get(peers.HeaderSignature)
	refuse := func(err error) error {
		_, outcome := httpStatus(err)
		h.countRelay("relay", outcome)
		c.Response().Header().Set(peers.HeaderOutcome, outcome)
		return h.refuse(c, event, id, err)
	}
	if req.ContentLength > MaxBodyBytes {
		return refuse(errTooLarge)
	}
	if len(h.peerSecs) == 0 || !peers.ValidInstanceID(from) || !peers.WellFormed(sig) {
		return refuse(errUnauthorized)
	}
	body, release, err := h.readBody(c)
	defer release()
	if err != nil {
		return refuse(err)
	}
	if !peers.Verify(sig, h.peerSecs, from, event, id, body) {
		return refuse(errUnauthorized)
	}
	answer := func(status int, outcome string) error {
		h.countRelay(from, outcome)
		c.Response().Header().Set(peers.HeaderOutcome, outcome)
		return c.JSON(status, Reply{Delivery: id, Event: event, Outcome: outcome, Redelivery: outcome == OutcomeDuplicate, Sources: []string{}})
	}
	if from == h.instance {
		h.logger.Debug("relay from this replica: not applied", "event", event, "delivery", id)
		return answer(http.StatusOK, OutcomeSelf)
	}
	if id == "" {
		h.countRelay(from, OutcomeNoID)
		c.Response().Header().Set(peers.HeaderOutcome, OutcomeNoID)
		h.logger.Warn("relay refused", "event", event, "relayed_from", from, "err", errNoDeliveryID)
		return c.JSON(http.StatusBadRequest, map[string]string{"error": errNoDeliveryID.Error()})
	}
	seen := h.begin(id)
	defer h.end(id)
	if seen {
		h.logger.Debug("relay of a delivery already handled: not applied again", "event", event, "delivery", id, "relayed_from", from)
		return answer(http.StatusOK, OutcomeDuplicate)
	}
	return h.deliver(c, start, event, id, body, false, from)
}

// countRelay tells Options.RelayMetrics of a relay received; from is ""
// for a delivery from GitHub, which is not counted.
func (h *Handler) countRelay(from, outcome string) {
	if from == "" || h.relayed == nil {
		return
	}
	h.relayed(outcome)
}
