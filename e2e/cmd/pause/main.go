// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Command pause is the sandbox ("pause") image's process on the local cluster's real node: it
// holds a Pod's namespaces and does nothing else until it is told to stop. Its image is built by
// e2e/cmd/image like the patterns', so no image ever comes from a registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
}
