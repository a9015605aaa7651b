package releases

import "time"

// PutRawForTest stores bytes as they would sit in a persistent store, so
// tests can plant undecodable or invalid entries.
func (m *MemoryStore) PutRawForTest(repo string, b []byte) { m.putRaw(repo, b) }

// WaitFollowUpJoinsForTest blocks until n callers wait for the follow-up
// request of repo (a refresh queued behind a request in flight).
func WaitFollowUpJoinsForTest(c *Client, repo string, n int) {
	key, _ := repoKey(repo)
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if e := c.entries[key]; e != nil && e.followUp != nil && e.joins >= n {
			return
		}
		c.idle.Wait()
	}
}

// PutForTest is Put, reporting whether the release was applied.
func PutForTest(c *Client, repo, tag, htmlURL string, publishedAt time.Time) bool {
	return c.put(repo, tag, htmlURL, publishedAt)
}
