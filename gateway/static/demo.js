// facecrop demo: detect faces in a photo, draw them, and crop it. No build step, no CDN.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { file: null, bitmap: null, cropTimer: null };

function authHeaders() {
  const key = $("api-key").value.trim();
  return key ? { Authorization: "Bearer " + key } : {};
}

function setStatus(text, isError = false) {
  $("status").textContent = text;
  $("status").classList.toggle("error", isError);
}

async function callApi(path, params) {
  const body = new FormData();
  body.append("image", state.file);
  const response = await fetch(path + "?" + new URLSearchParams(params), { method: "POST", body, headers: authHeaders() });
  if (!response.ok) {
    const problem = await response.json().catch(() => ({ error: { code: "error", message: response.statusText } }));
    throw new Error(problem.error.code + ": " + problem.error.message);
  }
  return response;
}

function drawFaces(faces) {
  const canvas = $("canvas");
  canvas.width = state.bitmap.width;
  canvas.height = state.bitmap.height;
  const context = canvas.getContext("2d");
  context.drawImage(state.bitmap, 0, 0);
  const line = Math.max(2, Math.round(canvas.width / 400));
  context.lineWidth = line;
  context.font = `${8 * line}px system-ui, sans-serif`;
  for (const face of faces) {
    const r = face.face_rectangle;
    context.strokeStyle = "#00e676";
    context.strokeRect(r.x, r.y, r.width, r.height);
    context.fillStyle = "#00e676";
    context.fillText(face.confidence.toFixed(1) + "%", r.x, Math.max(8 * line, r.y - 2 * line));
    context.fillStyle = "#ff1744";
    for (const [x, y] of Object.values(face.landmarks || {})) {
      context.beginPath();
      context.arc(x, y, 1.5 * line, 0, 2 * Math.PI);
      context.fill();
    }
  }
  $("face-count").textContent = `(${faces.length})`;
  $("face-count").dataset.count = String(faces.length);
}

function cropParams() {
  return { width: $("width").value, height: $("height").value, zoom: $("zoom").value, faces: $("faces").value, detail: detail() };
}

function detail() {
  return $("detail").checked ? "high" : "standard";
}

function showCurl(params) {
  const url = new URL("/v1/crop?" + new URLSearchParams(params), window.location.href);
  const key = $("api-key").value.trim() ? " -H 'Authorization: Bearer YOUR_KEY'" : "";
  $("curl").textContent = `curl -F image=@${state.file.name || "photo.jpg"}${key} '${url}' -o crop.jpg`;
}

async function crop() {
  if (!state.file) return;
  const params = cropParams();
  showCurl(params);
  try {
    const response = await callApi("/v1/crop", params);
    const previous = $("crop-result").src;
    $("crop-result").src = URL.createObjectURL(await response.blob());
    if (previous.startsWith("blob:")) URL.revokeObjectURL(previous);
    $("crop-result").dataset.rect = response.headers.get("X-Crop-Rect") || "";
  } catch (error) {
    setStatus(error.message, true);
  }
}

function scheduleCrop() {
  $("zoom-value").textContent = $("zoom").value;
  clearTimeout(state.cropTimer);
  state.cropTimer = setTimeout(crop, 250);
}

async function load(file) {
  state.file = file;
  setStatus(`Detecting faces in ${file.name}...`);
  $("face-count").dataset.count = "";
  try {
    state.bitmap = await createImageBitmap(file, { imageOrientation: "from-image" });
    const response = await callApi("/v1/detect", { min_confidence: 50, max_faces: 1000, detail: detail() });
    const result = await response.json();
    drawFaces(result.faces);
    setStatus(`${result.faces.length} face(s) in a ${result.image.width}x${result.image.height} photo.`);
    await crop();
  } catch (error) {
    setStatus(error.message, true);
  }
}

$("file").addEventListener("change", (event) => event.target.files[0] && load(event.target.files[0]));
const zone = $("drop-zone");
zone.addEventListener("dragover", (event) => { event.preventDefault(); zone.classList.add("over"); });
zone.addEventListener("dragleave", () => zone.classList.remove("over"));
zone.addEventListener("drop", (event) => {
  event.preventDefault();
  zone.classList.remove("over");
  if (event.dataTransfer.files[0]) load(event.dataTransfer.files[0]);
});
for (const id of ["width", "height", "zoom", "faces"]) $(id).addEventListener("input", scheduleCrop);
$("detail").addEventListener("change", () => state.file && load(state.file));
