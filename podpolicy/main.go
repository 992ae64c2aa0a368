// Command podpolicy admits Pods by their Namespace's labels, read from a per-replica informer
// cache with a collapsed live fallback on a miss.
package main

import (
	"github.com/kpatterns/kpatterns/podpolicy/config"
	"github.com/kpatterns/kpatterns/shared/app"
)

var pattern = config.Pattern

func main() { app.Main(pattern) }
