// Command widget reconciles Widgets: one custom resource managing a ConfigMap, a Deployment and a
// Service through stages, with automatic status.
package main

import (
	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/widget/config"
)

var pattern = config.Pattern

func main() { app.Main(pattern) }
