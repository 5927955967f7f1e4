package pools

// SettingKeys are the keys a pools file may hold, each as a path: a top-level key
// ("policy"), a pool's ("pools[].gpu_type") or its node's ("pools[].node.gpus"). The "pools"
// and "pools[].node" mappings themselves are left out. The settings reference in
// docs/operations.md is checked against them.
func SettingKeys() []string {
	var keys []string
	for _, k := range topKeys {
		if k != "pools" {
			keys = append(keys, k)
		}
	}
	for _, k := range poolKeys {
		if k != "node" {
			keys = append(keys, "pools[]."+k)
		}
	}
	for _, k := range nodeKeys {
		keys = append(keys, "pools[].node."+k)
	}
	return keys
}
