package fakegithub

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
)

// Repo is a repository as the fake lists it (organisation and user
// listings, GET /installation/repositories) and the tree of its default
// branch as the Git Trees API answers it.
type Repo struct {
	ID            int64 // assigned when zero (shared with releases' repositories)
	FullName      string
	Archived      bool
	Fork          bool
	Private       bool // listed to authenticated callers only
	Topics        []string
	DefaultBranch string // default "main"
	// CloneURL is what clone_url says (default HTMLURL/owner/name.git):
	// a test points it at its loopback git server.
	CloneURL string
	// Files are the blob paths of the default branch's tree; none is an
	// empty repository (the Trees API answers 409).
	Files []string
	// Truncated makes the recursive tree answer "truncated": true with
	// only its first entry, as GitHub does past its limits.
	Truncated bool
}

// repoState is the repository side of the fake.
type repoState struct {
	repos    map[int64]*Repo
	users    map[string]bool   // logins that are users, not organisations (lower case)
	accounts map[string]string // credential -> the account its installation is on
}

func (s *Server) reposLocked() *repoState {
	if s.gh == nil {
		s.gh = &repoState{repos: map[int64]*Repo{}, users: map[string]bool{}, accounts: map[string]string{}}
	}
	return s.gh
}

// AddRepo makes a repository listable and returns its id. An existing
// repository of that full name (a releases one too) keeps its id.
func (s *Server) AddRepo(r Repo) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.reposLocked()
	if r.ID == 0 {
		if old := st.byNameLocked(r.FullName); old != nil {
			r.ID = old.ID
		} else {
			r.ID = s.repoLocked(r.FullName).id
		}
	}
	if r.DefaultBranch == "" {
		r.DefaultBranch = "main"
	}
	r.Topics, r.Files = slices.Clone(r.Topics), slices.Clone(r.Files)
	st.repos[r.ID] = &r
	return r.ID
}

// EditRepo changes a listed repository in place (a rename or transfer
// is a new FullName; the id stays).
func (s *Server) EditRepo(id int64, edit func(*Repo)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.reposLocked().repos[id]
	if !ok {
		return fmt.Errorf("edit repository %d: %w", id, ErrNotFound)
	}
	edit(r)
	r.ID = id
	return nil
}

// DeleteRepo removes a listed repository.
func (s *Server) DeleteRepo(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.reposLocked().repos, id)
}

// SetUser makes login a user account: /orgs/{login}/repos answers 404
// and /users/{login}/repos lists its repositories.
func (s *Server) SetUser(login string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reposLocked().users[strings.ToLower(login)] = true
}

// SetInstallationAccount says which account the installation that
// credential belongs to is on: GET /installation/repositories with it
// lists that account's repositories, private ones included.
func (s *Server) SetInstallationAccount(credential, account string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reposLocked().accounts[credential] = account
}

func (st *repoState) byNameLocked(fullName string) *Repo {
	for _, r := range st.repos {
		if strings.EqualFold(r.FullName, fullName) {
			return r
		}
	}
	return nil
}

// routeReposLocked answers the repository endpoints; ok is false for
// other paths.
func (s *Server) routeReposLocked(r *http.Request, p, prefix string, authenticated bool, h http.Header) (answer, bool) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	st := s.reposLocked()
	apiBase := "http://" + r.Host + prefix
	switch {
	case len(parts) == 3 && parts[0] == "orgs" && parts[2] == "repos":
		if st.users[strings.ToLower(parts[1])] || !st.ownerKnownLocked(parts[1]) {
			return errorAnswer(h, http.StatusNotFound, "Not Found", "https://docs.github.com/rest/repos/repos#list-organization-repositories"), true
		}
		return s.repoListLocked(r, apiBase, p, st.ownedLocked(parts[1], authenticated), false, h), true
	case len(parts) == 3 && parts[0] == "users" && parts[2] == "repos":
		if !st.ownerKnownLocked(parts[1]) {
			return errorAnswer(h, http.StatusNotFound, "Not Found", "https://docs.github.com/rest/repos/repos#list-repositories-for-a-user"), true
		}
		return s.repoListLocked(r, apiBase, p, st.ownedLocked(parts[1], false), false, h), true
	case len(parts) == 2 && parts[0] == "installation" && parts[1] == "repositories":
		account, ok := st.accounts[bearer(r.Header.Get("Authorization"))]
		if !ok {
			return errorAnswer(h, http.StatusForbidden, "You must authenticate with an installation access token in order to list repositories for an installation.", "https://docs.github.com/rest/apps/installations#list-repositories-accessible-to-the-app-installation"), true
		}
		return s.repoListLocked(r, apiBase, p, st.ownedLocked(account, true), true, h), true
	case len(parts) >= 6 && parts[0] == "repos" && parts[3] == "git" && parts[4] == "trees":
		return s.treeLocked(r, apiBase, parts, authenticated, h), true
	}
	return answer{}, false
}

func bearer(auth string) string {
	scheme, tok, _ := strings.Cut(auth, " ")
	if strings.EqualFold(scheme, "bearer") || strings.EqualFold(scheme, "token") {
		return tok
	}
	return ""
}

func (st *repoState) ownerKnownLocked(login string) bool {
	for _, r := range st.repos {
		if o, _, _ := strings.Cut(r.FullName, "/"); strings.EqualFold(o, login) {
			return true
		}
	}
	return st.users[strings.ToLower(login)]
}

// ownedLocked lists login's repositories by id, private ones only to an
// authenticated caller.
func (st *repoState) ownedLocked(login string, private bool) []*Repo {
	var out []*Repo
	for _, r := range st.repos {
		if o, _, _ := strings.Cut(r.FullName, "/"); strings.EqualFold(o, login) && (!r.Private || private) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *Repo) int { return int(a.ID - b.ID) })
	return out
}

// repoListLocked answers one page of a listing with GitHub's Link
// header; installation wraps it as {"total_count", "repositories"}.
func (s *Server) repoListLocked(r *http.Request, apiBase, p string, repos []*Repo, installation bool, h http.Header) answer {
	q := r.URL.Query()
	perPage, page := pageOf(q)
	last := max((len(repos)+perPage-1)/perPage, 1)
	items := make([]repoJSON, 0, perPage)
	for i := (page - 1) * perPage; i < len(repos) && i < page*perPage; i++ {
		items = append(items, s.repoJSON(apiBase, repos[i]))
	}
	setLinks(h, apiBase, p, q, perPage, page, last)
	h.Set("Cache-Control", "private, max-age=60, s-maxage=60")
	if installation {
		return jsonAnswer(h, struct {
			TotalCount int        `json:"total_count"`
			Repos      []repoJSON `json:"repositories"`
		}{len(repos), items})
	}
	return jsonAnswer(h, items)
}

// repoJSON is GitHub's repository object, the fields discovery and
// go-github read, in GitHub's order.
type repoJSON struct {
	ID            int64    `json:"id"`
	NodeID        string   `json:"node_id"`
	Name          string   `json:"name"`
	FullName      string   `json:"full_name"`
	Private       bool     `json:"private"`
	Owner         user     `json:"owner"`
	HTMLURL       string   `json:"html_url"`
	Description   *string  `json:"description"`
	Fork          bool     `json:"fork"`
	URL           string   `json:"url"`
	GitURL        string   `json:"git_url"`
	SSHURL        string   `json:"ssh_url"`
	CloneURL      string   `json:"clone_url"`
	Archived      bool     `json:"archived"`
	Disabled      bool     `json:"disabled"`
	Topics        []string `json:"topics"`
	Visibility    string   `json:"visibility"`
	DefaultBranch string   `json:"default_branch"`
}

func (s *Server) repoJSON(apiBase string, r *Repo) repoJSON {
	owner, name, _ := strings.Cut(r.FullName, "/")
	webHost := strings.TrimPrefix(strings.TrimPrefix(s.htmlURL, "https://"), "http://")
	clone := r.CloneURL
	if clone == "" {
		clone = s.htmlURL + "/" + r.FullName + ".git"
	}
	vis := "public"
	if r.Private {
		vis = "private"
	}
	ownerType := "Organization"
	if s.reposLocked().users[strings.ToLower(owner)] {
		ownerType = "User"
	}
	topics := r.Topics
	if topics == nil {
		topics = []string{}
	}
	return repoJSON{
		ID: r.ID, NodeID: fmt.Sprintf("R_fake%d", r.ID), Name: name, FullName: r.FullName, Private: r.Private,
		Owner:   user{Login: owner, ID: int64(len(owner)) + 100, NodeID: "O_fake" + owner, Type: ownerType},
		HTMLURL: s.htmlURL + "/" + r.FullName, Fork: r.Fork, URL: apiBase + "/repos/" + r.FullName,
		GitURL: "git://" + webHost + "/" + r.FullName + ".git", SSHURL: "git@" + webHost + ":" + r.FullName + ".git",
		CloneURL: clone, Archived: r.Archived, Topics: topics, Visibility: vis, DefaultBranch: r.DefaultBranch,
	}
}

type treeEntry struct {
	Path string `json:"path"`
	Mode string `json:"mode"`
	Type string `json:"type"`
	SHA  string `json:"sha"`
	Size *int   `json:"size,omitempty"`
	URL  string `json:"url"`
}

// treeLocked answers GET /repos/{o}/{r}/git/trees/{ref}: the default
// branch's tree (by branch name or by its sha), its entries recursive
// with ?recursive=1 (any value, as GitHub reads it), top-level only
// without.
func (s *Server) treeLocked(r *http.Request, apiBase string, parts []string, authenticated bool, h http.Header) answer {
	const doc = "https://docs.github.com/rest/git/trees#get-a-tree"
	repo := s.reposLocked().byNameLocked(parts[1] + "/" + parts[2])
	if repo == nil || (repo.Private && !authenticated) {
		return errorAnswer(h, http.StatusNotFound, "Not Found", doc)
	}
	if len(repo.Files) == 0 {
		return errorAnswer(h, http.StatusConflict, "Git Repository is empty.", doc)
	}
	ref := strings.Join(parts[5:], "/")
	sha := treeSHA(repo.Files)
	if ref != repo.DefaultBranch && ref != sha && ref != "HEAD" {
		return errorAnswer(h, http.StatusNotFound, "Not Found", doc)
	}
	recursive := r.URL.Query().Has("recursive")
	files := slices.Sorted(slices.Values(repo.Files))
	var entries []treeEntry
	dirs := map[string]bool{}
	for _, f := range files {
		dir := path.Dir(f)
		for d := dir; d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
		if !recursive && strings.Contains(f, "/") {
			continue
		}
		size := len(f)
		blob := hashSHA1("blob " + f)
		entries = append(entries, treeEntry{Path: f, Mode: "100644", Type: "blob", SHA: blob, Size: &size, URL: apiBase + "/repos/" + repo.FullName + "/git/blobs/" + blob})
	}
	for d := range dirs {
		if !recursive && strings.Contains(d, "/") {
			continue
		}
		t := hashSHA1("tree " + d)
		entries = append(entries, treeEntry{Path: d, Mode: "040000", Type: "tree", SHA: t, URL: apiBase + "/repos/" + repo.FullName + "/git/trees/" + t})
	}
	slices.SortFunc(entries, func(a, b treeEntry) int { return strings.Compare(a.Path, b.Path) })
	truncated := recursive && repo.Truncated
	if truncated {
		entries = entries[:1]
	}
	return jsonAnswer(h, struct {
		SHA       string      `json:"sha"`
		URL       string      `json:"url"`
		Tree      []treeEntry `json:"tree"`
		Truncated bool        `json:"truncated"`
	}{sha, apiBase + "/repos/" + repo.FullName + "/git/trees/" + sha, entries, truncated})
}

// treeSHA stands in for the root tree's id: it changes whenever the
// files do.
func treeSHA(files []string) string {
	return hashSHA1("tree\x00" + strings.Join(slices.Sorted(slices.Values(files)), "\x00"))
}

func hashSHA1(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}
