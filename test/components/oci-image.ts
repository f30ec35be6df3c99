/**
 * @module test/components/oci-image — container images for the real-node tests, made on this
 * machine (no registry is reachable): an OCI image layout (`oci-layout`, `index.json`, blobs) in
 * one tar that `ctr images import` takes. The image holds the given host binaries, the shared
 * libraries `ldd` names for them, and busybox applet links, in one uncompressed layer packed by
 * the system's `tar`; its config names the command. No library builds OCI layouts from host
 * files, and the format is three small JSON documents, so it is written here.
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
  copyFileSync,
  cpSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

export interface ImageSpec {
  /** The image reference the runtime knows it by, e.g. "podpath.local/busybox:1". */
  readonly ref: string;
  /** Absolute host paths copied to the same path in the image (with their libraries). */
  readonly binaries: readonly string[];
  /** Names linked to /bin/busybox in /bin (when busybox is among the binaries). */
  readonly applets?: readonly string[];
  /** Host folders copied whole to the same path (plugins a binary loads at run time). */
  readonly folders?: readonly string[];
  readonly cmd: readonly string[];
}

/** The shared libraries (and the loader) a dynamically linked binary needs, as `ldd` lists them. */
function librariesOf(binary: string): string[] {
  let out = "";
  try {
    out = execFileSync("ldd", [binary], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
  } catch {
    return []; // "not a dynamic executable"
  }
  const libs: string[] = [];
  for (const line of out.split("\n")) {
    const m = /(\/\S+) \(0x/.exec(line);
    if (m?.[1]) libs.push(m[1]);
  }
  return libs;
}

function digest(data: Buffer): string {
  return `sha256:${createHash("sha256").update(data).digest("hex")}`;
}

/** Writes the image as an OCI layout tar at `out`. */
export function buildImage(spec: ImageSpec, out: string): void {
  const work = mkdtempSync(join(tmpdir(), "podpath-image-"));
  try {
    const root = join(work, "rootfs");
    for (const d of ["bin", "etc", "tmp", "proc", "sys", "dev", "run"]) {
      mkdirSync(join(root, d), { recursive: true });
    }
    const files = new Set<string>();
    for (const b of spec.binaries) {
      files.add(b);
      for (const l of librariesOf(b)) files.add(l);
    }
    for (const f of files) {
      const dest = join(root, f);
      mkdirSync(dirname(dest), { recursive: true });
      copyFileSync(realpathSync(f), dest);
      chmodSync(dest, 0o755);
    }
    for (const a of spec.applets ?? []) symlinkSync("busybox", join(root, "bin", a));
    for (const f of spec.folders ?? []) cpSync(f, join(root, f), { recursive: true });
    // tcpdump (as Debian builds it) drops to its own user after opening the device
    writeFileSync(
      join(root, "etc", "passwd"),
      "root:x:0:0:root:/:/bin/sh\ntcpdump:x:104:104::/:/bin/false\n",
    );
    writeFileSync(join(root, "etc", "group"), "root:x:0:\ntcpdump:x:104:\n");
    const layerFile = join(work, "layer.tar");
    execFileSync("tar", ["-C", root, "--owner=0", "--group=0", "-cf", layerFile, "."]);
    const layer = readFileSync(layerFile);
    const config = Buffer.from(
      JSON.stringify({
        architecture: "amd64",
        os: "linux",
        rootfs: { type: "layers", diff_ids: [digest(layer)] },
        config: { Cmd: spec.cmd, Env: ["PATH=/bin:/sbin:/usr/bin:/usr/sbin"] },
      }),
    );
    const manifest = Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: "application/vnd.oci.image.manifest.v1+json",
        config: {
          mediaType: "application/vnd.oci.image.config.v1+json",
          digest: digest(config),
          size: config.length,
        },
        layers: [
          {
            mediaType: "application/vnd.oci.image.layer.v1.tar",
            digest: digest(layer),
            size: layer.length,
          },
        ],
      }),
    );
    const layout = join(work, "layout");
    mkdirSync(join(layout, "blobs", "sha256"), { recursive: true });
    for (const blob of [layer, config, manifest]) {
      writeFileSync(join(layout, "blobs", "sha256", digest(blob).slice(7)), blob);
    }
    writeFileSync(join(layout, "oci-layout"), '{"imageLayoutVersion":"1.0.0"}');
    writeFileSync(
      join(layout, "index.json"),
      JSON.stringify({
        schemaVersion: 2,
        manifests: [
          {
            mediaType: "application/vnd.oci.image.manifest.v1+json",
            digest: digest(manifest),
            size: manifest.length,
            annotations: {
              "io.containerd.image.name": spec.ref,
              "org.opencontainers.image.ref.name": spec.ref,
            },
          },
        ],
      }),
    );
    execFileSync("tar", ["-C", layout, "-cf", out, "."]);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
