//go:build tools

// Package tunnels pins the userspace tunnel implementations the lab's tunnel scenarios run
// (built by scripts/build-components.sh into .components/).
package tunnels

import _ "golang.zx2c4.com/wireguard"
