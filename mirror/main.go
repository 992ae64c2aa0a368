// Command mirror copies ConfigMaps labelled patterns.kpatterns.dev/mirror=true into owned children.
package main

import (
	"github.com/kpatterns/kpatterns/mirror/config"
	"github.com/kpatterns/kpatterns/shared/app"
)

var pattern = config.Pattern

func main() { app.Main(pattern) }
