package view

import (
	"context"

	"github.com/slurmbridge/slurmbridge/bridge/quotaapi"
)

// Client reads quotad's API: bridge/quotaapi's, which quotactl and elasticd share.
type Client = quotaapi.Client

// DefaultAddr is quotad's default listen address (QUOTAD_LISTEN in quotad.env).
const DefaultAddr = quotaapi.DefaultAddr

// ReadCluster reads /cluster: the cluster page's data.
func ReadCluster(ctx context.Context, c *Client) (ClusterResponse, error) {
	return quotaapi.Get[ClusterResponse](ctx, c, "/cluster", false)
}
