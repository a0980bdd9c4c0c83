package sdk

import (
	"time"

	"golang.org/x/time/rate"

	"github.com/capov/capov/pkg/ovirt"
)

// Budget implements ovirt.Client: the provider's rate limiter, shared by all its sessions.
func (c *client) Budget() ovirt.Budget {
	return c.s.p.budget(time.Now())
}

func (p *provider) budget(now time.Time) ovirt.Budget {
	if p.limiter.Limit() == rate.Inf {
		return ovirt.Budget{Unlimited: true}
	}
	return ovirt.Budget{Tokens: p.limiter.TokensAt(now), Rate: float64(p.limiter.Limit()), Burst: p.limiter.Burst()}
}
