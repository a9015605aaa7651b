package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Delivery is one webhook delivery as the log keeps it. It mirrors
// webhook.Delivery field for field; cmd converts between the two, so that
// store does not import webhook.
type Delivery struct {
	ID         string    // X-GitHub-Delivery; empty when GitHub sent none
	Event      string    // X-GitHub-Event
	Action     string    // the payload's action
	Repo       string    // repository.full_name
	At         time.Time // when it was received
	Outcome    string    // what the webhook handler did with it
	Redelivery bool      // the ID had been seen before
	Sources    []string  // the sources it asked to sync
}

// deliveryV1 is the persisted form of a Delivery.
type deliveryV1 struct {
	V          int       `json:"v"`
	ID         string    `json:"id,omitempty"`
	Event      string    `json:"event,omitempty"`
	Action     string    `json:"action,omitempty"`
	Repo       string    `json:"repo,omitempty"`
	At         time.Time `json:"at"`
	Outcome    string    `json:"outcome,omitempty"`
	Redelivery bool      `json:"redelivery,omitempty"`
	Sources    []string  `json:"sources,omitempty"`
}

func encodeDelivery(d Delivery) ([]byte, error) {
	return json.Marshal(deliveryV1{1, d.ID, d.Event, d.Action, d.Repo, d.At, d.Outcome, d.Redelivery, d.Sources})
}

// openDelivery verifies and decodes a logged delivery stored under key.
func openDelivery(key, v []byte) (Delivery, error) {
	b, err := unseal(key, v)
	if err != nil {
		return Delivery{}, err
	}
	return decodeDelivery(b)
}

func decodeDelivery(b []byte) (Delivery, error) {
	var v deliveryV1
	if err := json.Unmarshal(b, &v); err != nil {
		return Delivery{}, err
	}
	if v.V != 1 {
		return Delivery{}, fmt.Errorf("%w %d", errFormat, v.V)
	}
	return Delivery{v.ID, v.Event, v.Action, v.Repo, v.At, v.Outcome, v.Redelivery, v.Sources}, nil
}

// SeenDelivery reports whether a delivery with this ID is in the log. The
// empty ID is never seen.
func (s *Store) SeenDelivery(id string) (bool, error) {
	if id == "" {
		return false, nil
	}
	var seen bool
	err := s.view("seen delivery", func(tx *bolt.Tx) error {
		ids := tx.Bucket(bucketDeliveryIDs)
		if ids == nil {
			return corrupt(s.path, errors.New("delivery_ids bucket missing"))
		}
		seen = ids.Get([]byte(id)) != nil
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("look up delivery %s: %w", id, err)
	}
	return seen, nil
}

// RecordDelivery appends a delivery to the log and, in the same
// transaction, drops the oldest ones beyond the log's bound. A redelivery
// is appended as its own entry.
func (s *Store) RecordDelivery(d Delivery) error {
	d.Sources = slices.Clone(d.Sources)
	val, err := encodeDelivery(d)
	if err != nil {
		return fmt.Errorf("record delivery %s: encode: %w", d.ID, err)
	}
	err = s.update("record delivery", func(tx *bolt.Tx) error {
		log, ids := tx.Bucket(bucketDeliveries), tx.Bucket(bucketDeliveryIDs)
		if log == nil || ids == nil {
			return corrupt(s.path, errors.New("delivery buckets missing"))
		}
		seq, err := log.NextSequence()
		if err != nil {
			return err
		}
		if err := log.Put(seqKey(seq), seal(seqKey(seq), val)); err != nil {
			return err
		}
		if err := addID(ids, d.ID, 1); err != nil {
			return err
		}
		// Keys are consecutive sequence numbers and only the oldest are
		// ever deleted, so the count is last-first+1.
		c := log.Cursor()
		for k, v := c.First(); k != nil; k, v = c.First() {
			if len(k) != 8 {
				return corrupt(s.path, fmt.Errorf("delivery key %x", k))
			}
			if seq-binary.BigEndian.Uint64(k)+1 <= uint64(s.maxDeliveries) {
				break
			}
			old, err := openDelivery(k, v)
			if err != nil {
				return corrupt(s.path, fmt.Errorf("delivery %x: %w", k, err))
			}
			if err := c.Delete(); err != nil {
				return err
			}
			if err := addID(ids, old.ID, -1); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record delivery %s: %w", d.ID, err)
	}
	return nil
}

// addID changes how many logged deliveries carry an ID.
func addID(ids *bolt.Bucket, id string, by int64) error {
	if id == "" {
		return nil
	}
	var n int64
	if v := ids.Get([]byte(id)); v != nil {
		var err error
		if n, err = openIDCount([]byte(id), v); err != nil {
			return fmt.Errorf("delivery id %q: %w", id, err)
		}
	}
	n += by
	if n <= 0 {
		return ids.Delete([]byte(id))
	}
	return ids.Put([]byte(id), seal([]byte(id), binary.AppendVarint(nil, n)))
}

// openIDCount verifies and decodes how many logged deliveries carry an ID.
func openIDCount(key, v []byte) (int64, error) {
	b, err := unseal(key, v)
	if err != nil {
		return 0, err
	}
	n, k := binary.Varint(b)
	if k <= 0 || k != len(b) {
		return 0, errors.New("bad count")
	}
	return n, nil
}

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// RecentDeliveries returns up to n deliveries, newest first (all of them
// when n is not positive).
func (s *Store) RecentDeliveries(n int) ([]Delivery, error) {
	var out []Delivery
	err := s.view("recent deliveries", func(tx *bolt.Tx) error {
		log := tx.Bucket(bucketDeliveries)
		if log == nil {
			return corrupt(s.path, errors.New("deliveries bucket missing"))
		}
		c := log.Cursor()
		for k, v := c.Last(); k != nil && (n <= 0 || len(out) < n); k, v = c.Prev() {
			d, err := openDelivery(k, v)
			if err != nil {
				return corrupt(s.path, fmt.Errorf("delivery %x: %w", k, err))
			}
			out = append(out, d)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read recent deliveries: %w", err)
	}
	return out, nil
}
