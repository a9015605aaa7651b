package webhook

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-github/v60/github"

	"github.com/skillreg/skillreg/gitref"
)

// The organisation events: a GitHub App's webhook receives them for every
// repository it is installed on, and they change which repositories a
// discovered source covers. The handler only passes them on to Discovery,
// whose work (listing, tree lookups, the sources it makes) runs in the
// background; it never calls the GitHub API itself.

// The repository actions passed on as RepoEvent.Action. Pushed is not a
// GitHub action: it is a push to the default branch of a repository that
// no source follows, so that a new repository appears with its first
// commit of skills. Added and removed are the repositories of an
// installation event.
const (
	ActionCreated     = "created"
	ActionDeleted     = "deleted"
	ActionArchived    = "archived"
	ActionUnarchived  = "unarchived"
	ActionRenamed     = "renamed"
	ActionTransferred = "transferred"
	ActionPublicized  = "publicized"
	ActionPrivatized  = "privatized"
	ActionPushed      = "pushed"
	ActionAdded       = "added"
	ActionRemoved     = "removed"
)

// The installation actions passed on as InstallationEvent.Action: the
// installation event's created, deleted, suspend and unsuspend, and the
// installation_repositories event's added and removed; and, to
// Options.Installations only, new_permissions_accepted.
const (
	ActionSuspend                = "suspend"
	ActionUnsuspend              = "unsuspend"
	ActionNewPermissionsAccepted = "new_permissions_accepted"
)

// RepoEvent is a change to one repository, as a delivery tells it. Every
// value is read from a signed payload and checked for shape: ID is
// positive and FullName (and OldFullName, when set) is "owner/name" in
// GitHub's alphabet; a URL that gitref cannot parse is left empty.
type RepoEvent struct {
	Action                  string // one of the Action constants
	ID                      int64  // GitHub's repository id: the one key that survives renames and transfers
	FullName                string // owner/name now
	OldFullName             string // before a rename or transfer, else ""
	Archived, Fork, Private bool
	DefaultBranch           string
	CloneURL, HTMLURL       string
	Topics                  []string
}

// InstallationEvent is a change to one installation of the App: it was
// created, deleted, suspended or unsuspended, or repositories were added to
// it or removed from it. Repos holds the repositories the payload lists,
// each with Action added (created, added) or removed (deleted, removed);
// installation payloads carry only their id, full name and visibility.
type InstallationEvent struct {
	Action         string
	InstallationID int64
	Account        string // the owner login the App is installed on
	Repos          []RepoEvent
}

// Discovery receives the organisation events for discovered sources. Both
// methods are called on the request path and must return at once, applying
// the change in the background; an event is a hint to look again, so a
// redelivery is passed on as well.
type Discovery interface {
	Repository(ev RepoEvent)
	Installation(ev InstallationEvent)
}

// repositoryActions are the repository event's actions passed on; others
// (edited) are ignored.
var repositoryActions = []string{ActionCreated, ActionDeleted, ActionArchived, ActionUnarchived,
	ActionRenamed, ActionTransferred, ActionPublicized, ActionPrivatized}

// installationActions are the installation event's actions passed on to
// Discovery; others (new_permissions_accepted) are not.
var installationActions = []string{ActionCreated, ActionDeleted, ActionSuspend, ActionUnsuspend}

// appActions are the installation event's actions passed on to
// Options.Installations: each changes the account's installation or what
// its tokens may do, so what the GitHub App holds for it is stale.
var appActions = []string{ActionCreated, ActionDeleted, ActionSuspend, ActionUnsuspend, ActionNewPermissionsAccepted}

// Bounds on the names in a payload: GitHub's logins are at most 39
// characters and repository names at most 100.
const (
	maxOwnerLen = 39
	maxNameLen  = 100
)

// validOwner reports whether s can be a GitHub login: letters, digits and
// hyphens (and, for Enterprise managed users, underscores).
func validOwner(s string) bool {
	if s == "" || len(s) > maxOwnerLen {
		return false
	}
	for _, c := range []byte(s) {
		if !isAlnum(c) && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// validRepoName reports whether s can be a GitHub repository name: letters,
// digits, '.', '-' and '_', and neither "." nor "..".
func validRepoName(s string) bool {
	if s == "" || len(s) > maxNameLen || s == "." || s == ".." {
		return false
	}
	for _, c := range []byte(s) {
		if !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// validFullName reports whether s is "owner/name" as GitHub spells them.
func validFullName(s string) bool {
	owner, name, ok := strings.Cut(s, "/")
	return ok && validOwner(owner) && validRepoName(name)
}

// parsedURL returns raw when gitref parses it as a repository URL, else "".
func parsedURL(raw string) string {
	if raw == "" {
		return ""
	}
	if _, err := gitref.ParseRepo(raw); err != nil {
		return ""
	}
	return raw
}

// checkRepoEvent refuses a repository that a payload names without an id
// or with a name GitHub cannot have: a payload of the event always carries
// both, and Discovery keys its sources by them.
func checkRepoEvent(ev RepoEvent) error {
	if ev.ID <= 0 {
		return fmt.Errorf("repository %q without an id: %w", ev.FullName, errMalformed)
	}
	if !validFullName(ev.FullName) {
		return fmt.Errorf("repository %d: full name is not owner/name: %w", ev.ID, errMalformed)
	}
	if ev.OldFullName != "" && !validFullName(ev.OldFullName) {
		return fmt.Errorf("repository %d: previous full name is not owner/name: %w", ev.ID, errMalformed)
	}
	return nil
}

// fromGitHubRepo reads a repository object of a repository or installation
// payload.
func fromGitHubRepo(action string, r *github.Repository) RepoEvent {
	if r == nil {
		return RepoEvent{Action: action}
	}
	return RepoEvent{
		Action:        action,
		ID:            r.GetID(),
		FullName:      r.GetFullName(),
		Archived:      r.GetArchived(),
		Fork:          r.GetFork(),
		Private:       r.GetPrivate(),
		DefaultBranch: r.GetDefaultBranch(),
		CloneURL:      parsedURL(r.GetCloneURL()),
		HTMLURL:       parsedURL(r.GetHTMLURL()),
		Topics:        topics(r.Topics),
	}
}

// maxTopics bounds the topics passed on for one repository: GitHub allows
// 20, so a longer list only holds memory in Discovery.
const maxTopics = 100

// topics copies at most maxTopics of a payload's topics.
func topics(t []string) []string {
	if t == nil {
		return nil
	}
	return slices.Clone(t[:min(len(t), maxTopics)])
}

// fromPushRepo reads a push payload's repository, for ActionPushed.
func fromPushRepo(r *github.PushEventRepository) RepoEvent {
	if r == nil {
		return RepoEvent{Action: ActionPushed}
	}
	return RepoEvent{
		Action:        ActionPushed,
		ID:            r.GetID(),
		FullName:      r.GetFullName(),
		Archived:      r.GetArchived(),
		Fork:          r.GetFork(),
		Private:       r.GetPrivate(),
		DefaultBranch: firstNonEmpty(r.GetDefaultBranch(), r.GetMasterBranch()),
		CloneURL:      parsedURL(r.GetCloneURL()),
		HTMLURL:       parsedURL(r.GetHTMLURL()),
		Topics:        topics(r.Topics),
	}
}

// oldFullName is the repository's full name before a rename (the old name
// under the current owner) or a transfer (the current name under the old
// owner, a user or an organisation); "" for other actions or when the
// payload does not say.
func oldFullName(e *github.RepositoryEvent) string {
	name := e.GetRepo().GetName()
	owner := e.GetRepo().GetOwner().GetLogin()
	if owner == "" || name == "" {
		owner, name, _ = strings.Cut(e.GetRepo().GetFullName(), "/")
	}
	ch := e.GetChanges()
	switch e.GetAction() {
	case ActionRenamed:
		if ch.GetRepo().GetName().GetFrom() == "" {
			return ""
		}
		return owner + "/" + ch.GetRepo().GetName().GetFrom()
	case ActionTransferred:
		from := ch.GetOwner().GetOwnerInfo()
		login := firstNonEmpty(from.GetUser().GetLogin(), from.GetOrg().GetLogin())
		if login == "" {
			return ""
		}
		return login + "/" + name
	}
	return ""
}

// readRepositoryEvent fills p from a repository event: the repository for
// matching and the log, and the event for Discovery when its action is one
// it acts on.
func readRepositoryEvent(p *payload, e *github.RepositoryEvent) error {
	p.action = e.GetAction()
	p.repo = fromRepository(e.GetRepo())
	if p.action == "edited" && e.GetChanges().GetDefaultBranch().GetFrom() != "" {
		p.defaultBranchChanged = true
	}
	if !slices.Contains(repositoryActions, p.action) {
		return nil
	}
	ev := fromGitHubRepo(p.action, e.GetRepo())
	ev.OldFullName = oldFullName(e)
	if err := checkRepoEvent(ev); err != nil {
		return fmt.Errorf("repository %s: %w", p.action, err)
	}
	p.repoEvent = &ev
	return nil
}

// MaxEventRepos bounds the repositories an installation event passes on:
// past it, Repos is left empty and Discovery, which lists the account
// again after every installation event, learns them from the listing.
const MaxEventRepos = 10000

// installationPayload is what the handler reads of an installation or
// installation_repositories payload. It is decoded into these small
// structs rather than go-github's: a payload within the value bound can
// list a million repositories, and go-github's Repository (a few hundred
// bytes of pointers each) would make that gigabytes, where these take 32
// bytes apiece.
type installationPayload struct {
	Action       string `json:"action"`
	Installation struct {
		ID      int64 `json:"id"`
		Account struct {
			Login string `json:"login"`
		} `json:"account"`
	} `json:"installation"`
	Repositories        []installedRepo `json:"repositories"`         // installation
	RepositoriesAdded   []installedRepo `json:"repositories_added"`   // installation_repositories
	RepositoriesRemoved []installedRepo `json:"repositories_removed"` // installation_repositories
}

// installedRepo is a repository as installation payloads list it.
type installedRepo struct {
	ID       int64  `json:"id"`
	FullName string `json:"full_name"`
	Private  bool   `json:"private"`
}

// parseInstallation fills p from an installation or
// installation_repositories payload (raw, within the bounds).
func parseInstallation(p *payload, raw []byte) error {
	var in installationPayload
	if err := json.Unmarshal(raw, &in); err != nil {
		return fmt.Errorf("%w: %w", errMalformed, err)
	}
	p.action = in.Action
	var added, removed []installedRepo
	forDiscovery := true
	switch {
	case p.event == "installation" && in.Action == ActionCreated:
		added = in.Repositories
	case p.event == "installation" && in.Action == ActionDeleted:
		removed = in.Repositories
	case p.event == "installation" && slices.Contains(installationActions, in.Action):
	case p.event == "installation" && slices.Contains(appActions, in.Action):
		forDiscovery = false // only the App's tokens change
	case p.event == "installation_repositories" && in.Action == ActionAdded:
		added = in.RepositoriesAdded
	case p.event == "installation_repositories" && in.Action == ActionRemoved:
		removed = in.RepositoriesRemoved
	default:
		return nil // an action neither Discovery nor the App acts on
	}
	ev := InstallationEvent{
		Action:         in.Action,
		InstallationID: in.Installation.ID,
		Account:        in.Installation.Account.Login,
	}
	if ev.InstallationID <= 0 || !validOwner(ev.Account) {
		return fmt.Errorf("installation %s without an id or account: %w", in.Action, errMalformed)
	}
	keep := len(added)+len(removed) <= MaxEventRepos
	if keep && len(added)+len(removed) > 0 {
		ev.Repos = make([]RepoEvent, 0, len(added)+len(removed))
	}
	for _, list := range []struct {
		action string
		repos  []installedRepo
	}{{ActionAdded, added}, {ActionRemoved, removed}} {
		for _, r := range list.repos {
			re := RepoEvent{Action: list.action, ID: r.ID, FullName: r.FullName, Private: r.Private}
			if err := checkRepoEvent(re); err != nil {
				return fmt.Errorf("installation %s: %w", in.Action, err)
			}
			if keep {
				ev.Repos = append(ev.Repos, re)
			}
		}
	}
	if p.event == "installation" && slices.Contains(appActions, in.Action) {
		p.appInstallation = &InstallationEvent{Action: ev.Action, InstallationID: ev.InstallationID, Account: ev.Account}
	}
	if forDiscovery {
		p.installation = &ev
	}
	return nil
}

// pushedToUntracked returns the push to pass on to Discovery as
// ActionPushed: a push that creates or moves the default branch (any
// branch when the payload does not name the default) of a repository that
// no source follows. nil when there is none.
func (h *Handler) pushedToUntracked(p *payload) *RepoEvent {
	if h.discovery == nil || p.event != "push" || p.pushed == nil || p.pushDeleted {
		return nil
	}
	if len(sameRepo(h.targets(), p.repo, h.host)) > 0 {
		return nil
	}
	if b := p.pushed.DefaultBranch; b != "" && p.ref != headsPrefix+b {
		return nil
	}
	if !strings.HasPrefix(p.ref, headsPrefix) {
		return nil
	}
	if checkRepoEvent(*p.pushed) != nil {
		return nil
	}
	return p.pushed
}

// applyRepository handles a repository event: a change of the default
// branch (edited, with changes.default_branch) asks for syncs of the
// sources that follow the repository's default branch, since what they
// serve is now another branch; the actions Discovery acts on are passed on.
func (h *Handler) applyRepository(p *payload, reason string) Reply {
	if !p.defaultBranchChanged {
		return h.applyDiscovery(p)
	}
	var hit []Target
	for _, t := range sameRepo(h.targets(), p.repo, h.host) {
		if t.Pin.Kind == gitref.Default {
			hit = append(hit, t)
		}
	}
	srcs := names(hit)
	if len(srcs) == 0 {
		return Reply{Outcome: OutcomeUntracked, Sources: srcs}
	}
	h.requestSyncs(srcs, reason)
	return Reply{Outcome: OutcomeAccepted, Sources: srcs}
}

// applyInstallation handles an installation or installation_repositories
// event: the App is told first (so that discovery's listing of the account,
// which may use the App's token for it, finds the installation as it is
// now), then Discovery. Accepted when only the App acts on it.
func (h *Handler) applyInstallation(p *payload) Reply {
	toApp := h.installations != nil && p.appInstallation != nil
	if toApp {
		h.tellApp(*p.appInstallation)
	}
	rep := h.applyDiscovery(p)
	if toApp && rep.Outcome == OutcomeIgnored {
		return Reply{Outcome: OutcomeAccepted, Sources: []string{}}
	}
	return rep
}

// applyDiscovery passes a repository or installation event on to
// Discovery: accepted when there is one and the action is one it acts on.
func (h *Handler) applyDiscovery(p *payload) Reply {
	if h.discovery == nil || (p.repoEvent == nil && p.installation == nil) {
		return Reply{Outcome: OutcomeIgnored, Sources: []string{}}
	}
	if p.repoEvent != nil {
		h.tellRepository(*p.repoEvent)
	} else {
		h.tellInstallation(*p.installation)
	}
	return Reply{Outcome: OutcomeDiscovery, Sources: []string{}}
}

// tellRepository, tellApp and tellInstallation pass an event on, unless
// the handler is closed: as with sync requests, a stopping daemon is handed
// nothing.
func (h *Handler) tellRepository(ev RepoEvent) {
	if h.closed.Load() || h.stop.Err() != nil {
		h.logger.Debug("webhook closed, repository event dropped", "repo", ev.FullName, "action", ev.Action)
		return
	}
	h.discovery.Repository(ev)
}

func (h *Handler) tellApp(ev InstallationEvent) {
	if h.closed.Load() || h.stop.Err() != nil {
		h.logger.Debug("webhook closed, installation event dropped", "account", ev.Account, "action", ev.Action)
		return
	}
	h.installations(ev)
}

func (h *Handler) tellInstallation(ev InstallationEvent) {
	if h.closed.Load() || h.stop.Err() != nil {
		h.logger.Debug("webhook closed, installation event dropped", "account", ev.Account, "action", ev.Action)
		return
	}
	h.discovery.Installation(ev)
}
