// Cover crops by sharp (libvips), for make bench: node sharp_crop.js '<job>', where the job is JSON
// {"files": [...], "width": 256, "height": 256, "position": "attention"}. Prints one JSON line: the
// CPU ms per image (this process, one libvips thread, after a warm-up) and each crop's offset in
// the resized picture (sharp reports it for the attention and entropy strategies).
"use strict";
const fs = require("fs");
const sharp = require("sharp");

sharp.concurrency(1);

async function main() {
  const job = JSON.parse(process.argv[2]);
  const inputs = job.files.map((file) => fs.readFileSync(file));
  const crop = (input) =>
    sharp(input)
      .resize(job.width, job.height, { fit: "cover", position: job.position })
      .jpeg({ quality: 85 })
      .toBuffer({ resolveWithObject: true });
  await crop(inputs[0]);
  const offsets = [];
  const before = process.cpuUsage();
  for (const input of inputs) {
    const { info } = await crop(input);
    offsets.push([info.cropOffsetLeft || 0, info.cropOffsetTop || 0]);
  }
  const used = process.cpuUsage(before);
  console.log(JSON.stringify({ cpu_ms: (used.user + used.system) / 1000 / inputs.length, offsets }));
}

main();
