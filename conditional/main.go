// Command conditional reconciles ConfigProfiles: first-match cases generate a configuration that
// an owned Deployment rolls out by checksum.
package main

import (
	"github.com/kpatterns/kpatterns/conditional/config"
	"github.com/kpatterns/kpatterns/shared/app"
)

var pattern = config.Pattern

func main() { app.Main(pattern) }
