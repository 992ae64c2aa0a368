// Command reloader rolls opted-in Deployments when a ConfigMap they reference changes.
package main

import (
	"github.com/kpatterns/kpatterns/reloader/config"
	"github.com/kpatterns/kpatterns/shared/app"
)

var pattern = config.Pattern

func main() { app.Main(pattern) }
