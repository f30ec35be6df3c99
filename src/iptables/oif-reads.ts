/**
 * @module iptables/oif-reads — whether an evaluation's rules tested the packet's outgoing
 * interface (`-o`). The whole path asks nat POSTROUTING with the interface the route to the
 * packet's original destination gives, before it knows where a DNAT sends it; when no rule read
 * that interface (and no MASQUERADE took its address), the answer holds for the interface the
 * endpoint's route gives too, and nat is not asked again (path/evaluate-path).
 */

/**
 * Set by every test of the outgoing interface; the reader clears it before the evaluation it
 * watches. One holder object: a property store costs the predicate less than an imported binding.
 */
export const OIF_READS: { read: boolean } = { read: false };
