package catalog

import "fmt"

// Trigger says what asked for a sync. The runner's queue serves a sync a
// webhook asked for first (someone pushed and waits to see it); the others
// wait their turn.
type Trigger uint8

// The triggers of a sync.
const (
	TriggerManual  Trigger = iota // a person or a test asked (`skillreg sync`)
	TriggerConfig                 // the source was configured, or its configuration changed
	TriggerPoll                   // its poll interval passed
	TriggerRetry                  // its backoff after a transient failure passed
	TriggerWatch                  // a watched directory changed
	TriggerChanged                // a served file no longer matches what the catalog states
	TriggerWebhook                // a webhook delivery named the source
)

var triggerNames = [...]string{
	TriggerManual: "manual", TriggerConfig: "configured", TriggerPoll: "poll", TriggerRetry: "retry",
	TriggerWatch: "directory changed", TriggerChanged: "file changed", TriggerWebhook: "webhook",
}

// String names the trigger for logs.
func (t Trigger) String() string {
	if int(t) < len(triggerNames) {
		return triggerNames[t]
	}
	return fmt.Sprintf("Trigger(%d)", int(t))
}

// Urgent reports whether the sync is awaited by someone who just changed
// the source upstream.
func (t Trigger) Urgent() bool { return t == TriggerWebhook }
