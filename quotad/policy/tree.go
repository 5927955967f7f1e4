package policy

// accountTree maps every account to the project whose quota covers it: the account itself
// when it is a project, else its nearest ancestor that is one.
//
// This is what Slurm does with the guaranteed QOS. A sub-account's association inherits its
// parent's QOS list and default QOS, so its jobs run in the parent project's guaranteed QOS and
// count in that QOS's GrpTRES together with the parent's own jobs. A QOS limit counts the jobs
// in that QOS only, so a project nested in another has its own guaranteed QOS and its subtree
// counts there, not in the outer project's: the nearest project wins.
type accountTree struct {
	parent    map[string]string
	isProject map[string]bool
	memo      map[string]string
}

func newAccountTree(cfg *Config, accounts []Account) *accountTree {
	t := &accountTree{parent: map[string]string{}, isProject: map[string]bool{}, memo: map[string]string{}}
	for _, a := range accounts {
		if a.Parent != "" && a.Parent != a.Name {
			t.parent[a.Name] = a.Parent
		}
	}
	for _, p := range cfg.Projects {
		t.isProject[p.Account] = true
	}
	return t
}

// maxTreeDepth bounds the walk up the tree, so a cycle in bad data cannot hang a cycle.
const maxTreeDepth = 64

// projectOf is the project account that covers account, "" for none.
func (t *accountTree) projectOf(account string) string {
	if p, ok := t.memo[account]; ok {
		return p
	}
	found := ""
	a := account
	for range maxTreeDepth {
		if t.isProject[a] {
			found = a
			break
		}
		next, ok := t.parent[a]
		if !ok {
			break
		}
		a = next
	}
	t.memo[account] = found
	return found
}
