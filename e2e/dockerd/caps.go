// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package dockerd

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// capNames are Linux's capabilities by number (linux/capability.h).
var capNames = []string{"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID",
	"SETUID", "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW",
	"IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN",
	"SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE",
	"AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM", "BLOCK_SUSPEND",
	"AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE"}

// MissingCaps are the names (CAP_…) of the capabilities this process's bounding set lacks.
func MissingCaps() (map[string]bool, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		hex, ok := strings.CutPrefix(line, "CapBnd:")
		if !ok {
			continue
		}
		bnd, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
		if err != nil {
			return nil, fmt.Errorf("CapBnd %q: %w", hex, err)
		}
		missing := map[string]bool{}
		for i, name := range capNames {
			if bnd&(1<<i) == 0 {
				missing["CAP_"+name] = true
			}
		}
		return missing, nil
	}
	return nil, fmt.Errorf("no CapBnd line in /proc/self/status")
}
