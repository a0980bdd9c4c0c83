package v1beta2

import "testing"

func TestVMIDFromProviderIDAcceptsOnlyAUUID(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"ovirt://0f6c1c8e-3b1a-4c2e-9d7f-2a5b8c9d0e1f", "0f6c1c8e-3b1a-4c2e-9d7f-2a5b8c9d0e1f", true},
		{"ovirt://0F6C1C8E-3B1A-4C2E-9D7F-2A5B8C9D0E1F", "0F6C1C8E-3B1A-4C2E-9D7F-2A5B8C9D0E1F", true},
		{"", "", false},
		{"ovirt://", "", false},
		{"vsphere://0f6c1c8e-3b1a-4c2e-9d7f-2a5b8c9d0e1f", "", false},
		{"ovirt://0f6c1c8e-3b1a-4c2e-9d7f-2a5b8c9d0e1", "", false},
		{"ovirt://0f6c1c8e-3b1a-4c2e-9d7f-2a5b8c9d0e1fa", "", false},
		{"ovirt://0f6c1c8e-3b1a-4c2e-9d7f/2a5b8c9d0e1f", "", false},
		{"ovirt://../../disks/0f6c1c8e-3b1a-4c2e-9d", "", false},
		{"ovirt://0f6c1c8e-3b1a-4c2e-9d7f-2a5b8c9d0e1g", "", false},
	} {
		got, ok := VMIDFromProviderID(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("VMIDFromProviderID(%q) = %q, %t; want %q, %t", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
