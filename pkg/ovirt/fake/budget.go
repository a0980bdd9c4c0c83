package fake

import "github.com/capov/capov/pkg/ovirt"

// Budget implements ovirt.Client: BudgetFunc when set, else an unlimited budget (the fake has
// no rate limit).
func (c *Client) Budget() ovirt.Budget {
	if c.BudgetFunc != nil {
		return c.BudgetFunc()
	}
	return ovirt.Budget{Unlimited: true}
}
