package quotaapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/auth"
)

// DefaultAddr is quotad's default listen address (QUOTAD_LISTEN in quotad.env).
const DefaultAddr = "127.0.0.1:9817"

// Client reads quotad's API.
type Client struct {
	BaseURL string // from BaseURL(addr)
	HTTP    *http.Client
	// Credential returns a MUNGE credential holding payload, for requests about jobs; nil
	// sends none (the server then refuses them).
	Credential func(ctx context.Context, payload string) (string, error)
}

// APIError is an answer other than 200, with the server's reason.
type APIError struct {
	Code    int
	Message string
	Status  *Status
}

func (e *APIError) Error() string {
	return fmt.Sprintf("quotad answered %d %s: %s", e.Code, http.StatusText(e.Code), e.Message)
}

// BaseURL turns an address as quotad's --listen or a URL spells it into the API's base URL: a
// listen address on all interfaces (":9817", "0.0.0.0:9817") is reached on the loopback.
func BaseURL(addr string) (string, error) {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		addr = DefaultAddr
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		return "", fmt.Errorf("quotad address %q: %w", addr, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("quotad address %q: want http://HOST:PORT or HOST:PORT", addr)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return "", fmt.Errorf("quotad address %q: want HOST:PORT: %w", addr, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	u.Host = net.JoinHostPort(host, port)
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	return u.String(), nil
}

// Status reads /status.
func (c *Client) Status(ctx context.Context) (StatusResponse, error) {
	return Get[StatusResponse](ctx, c, "/status", false)
}

// Projects reads /projects.
func (c *Client) Projects(ctx context.Context) (ProjectsResponse, error) {
	return Get[ProjectsResponse](ctx, c, "/projects", false)
}

// Project reads /projects/{account}.
func (c *Client) Project(ctx context.Context, account string) (ProjectResponse, error) {
	return Get[ProjectResponse](ctx, c, "/projects/"+url.PathEscape(account), false)
}

// Types reads /types.
func (c *Client) Types(ctx context.Context) (TypesResponse, error) {
	return Get[TypesResponse](ctx, c, "/types", false)
}

// Jobs reads /jobs: the jobs the caller may read.
func (c *Client) Jobs(ctx context.Context) (JobsResponse, error) {
	return Get[JobsResponse](ctx, c, "/jobs", true)
}

// Job reads /jobs/{id}: id is a job id, or an array task as squeue prints it (123_7).
func (c *Client) Job(ctx context.Context, id string) (JobResponse, error) {
	return Get[JobResponse](ctx, c, "/jobs/"+url.PathEscape(id), true)
}

// Get reads path (under /api/v1) into a T; private requests carry a MUNGE credential.
func Get[T any](ctx context.Context, c *Client, path string, private bool) (T, error) {
	var out T
	err := c.get(ctx, path, private, &out)
	return out, err
}

func (c *Client) get(ctx context.Context, path string, private bool, out any) error {
	u, err := url.Parse(c.BaseURL + "/api/" + APIVersion + path)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	if private && c.Credential != nil {
		cred, err := c.Credential(ctx, CredentialPayload(http.MethodGet, u.EscapedPath()))
		if err != nil {
			return fmt.Errorf("making a MUNGE credential: %w", err)
		}
		req.Header.Set("Authorization", auth.Scheme+" "+cred)
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("reaching quotad at %s: %w (is quotad running there? the address comes from --quotad or SLURMBRIDGE_QUOTAD_URL)", c.BaseURL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("reading quotad's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e ErrorResponse
		if json.Unmarshal(body, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(body))
		}
		return &APIError{Code: resp.StatusCode, Message: e.Error, Status: e.Status}
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("quotad's answer to %s is not the JSON expected: %w", path, err)
	}
	return nil
}

// CredentialPayload is what the credential of a request to quotad's API must hold: quotad's
// own, so that a credential made for elasticd's API is never taken here.
func CredentialPayload(method, path string) string {
	return "slurmbridge-quotad-api " + method + " " + path
}

// IsNotFound says whether err is the API's 404.
func IsNotFound(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Code == http.StatusNotFound
}
