// Command childset reconciles Bundles: one ConfigMap per entry, and guarded pruning of the
// ConfigMaps of entries that left the spec.
package main

import (
	"github.com/kpatterns/kpatterns/childset/config"
	"github.com/kpatterns/kpatterns/shared/app"
)

var pattern = config.Pattern

func main() { app.Main(pattern) }
