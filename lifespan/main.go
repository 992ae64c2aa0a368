// Command lifespan makes the process and leadership lifetime hooks observable: a Heartbeat of
// leadership terms, an Event per hook, and an Observed Event per version of each labelled
// ConfigMap. See README.md.
package main

import (
	"github.com/kpatterns/kpatterns/lifespan/config"
	"github.com/kpatterns/kpatterns/shared/app"
)

var pattern = config.Pattern

func main() { app.Main(pattern) }
