// Command etcd is the etcd server of go.etcd.io/etcd/server/v3 (its etcdmain, as the etcd
// binary runs it), built for the component tests by scripts/build-components.sh.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
