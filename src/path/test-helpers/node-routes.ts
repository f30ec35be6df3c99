/**
 * @module path/test-helpers/node-routes — the small node the whole-path unit tests route through,
 * as `ip route show table all` prints it: a pod bridge pod0 (10.244.0.0/24, the node 10.244.0.1)
 * and an uplink eth0 (192.168.10.0/24, the node 192.168.10.2, gateway 192.168.10.1).
 */
export const NODE_TEST_ROUTES = [
  "default via 192.168.10.1 dev eth0",
  "10.244.0.0/24 dev pod0 proto kernel scope link src 10.244.0.1",
  "192.168.10.0/24 dev eth0 proto kernel scope link src 192.168.10.2",
  "local 10.244.0.1 dev pod0 table local proto kernel scope host src 10.244.0.1",
  "local 192.168.10.2 dev eth0 table local proto kernel scope host src 192.168.10.2",
  "",
].join("\n");
