//go:build !linux

package main

import (
	"errors"
	"io"
	"time"

	"github.com/capov/capov/test/ovirtsim"
)

func startGuests(*ovirtsim.Simulator, guestFlags, io.Writer) (func(), error) {
	return nil, errors.New("real guests need Linux namespaces")
}

type guestFlags struct {
	dir, template, guestInit, bridge string
	stopTimeout                      time.Duration
}
