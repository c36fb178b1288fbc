// The <img> attributes that real front-end libraries write for facecrop's /cdn-cgi/image/ URLs, as
// JSON on stdout: {library: [{name, kind, source, src, srcset, sizes, width, height, loading}]}.
// tests/integration/test_frontend_libraries.py fetches every URL and puts each library's images on a
// page in Chromium. Usage: node urls.mjs '{"hero.jpg": [6144, 4608], "astronaut.jpg": [512, 512], ...}'
// (the photos under /photos/ on the site, with their sizes: Astro's imported images carry them).
//
// unpic 4.2.2 (@unpic/core 1.0.3), @nuxt/image 2.1.0's cloudflare provider and astro 7.3.5 with
// @astrojs/cloudflare 14.3.3's image service run as shipped (package-lock.json); the two Next.js
// loaders are the functions printed in Next.js 16's and Cloudflare's docs, with Next's srcset rule.
import { register } from "node:module";

register("./define.mjs", import.meta.url);

const { transformProps } = await import("@unpic/core");
const { createImage } = await import("./node_modules/@nuxt/image/dist/runtime/image.js");
const { default: nuxtCloudflare } = await import("@nuxt/image/runtime/providers/cloudflare");
const { getImage } = await import("astro/assets");
const { default: astroCloudflare } = await import("@astrojs/cloudflare/image-service");

const SOURCES = JSON.parse(process.argv[2]);
const path = (name) => `/photos/${name}`;

// unpic: <Image> from @unpic/react, @unpic/vue, ... all come down to @unpic/core's transformProps.
function unpic() {
  const image = (name, kind, source, props) => ({
    name,
    kind,
    source,
    ...transformProps({ src: path(source), cdn: "cloudflare", alt: name, ...props }),
  });
  const cf = (operations) => ({ operations: { cloudflare: operations } });
  const fixed = { layout: "fixed", width: 320, height: 240 };
  return [
    image("hero", "responsive", "hero.jpg", { layout: "fullWidth", aspectRatio: 4 / 3, priority: true }),
    image("hero-scale-down", "responsive", "astronaut.jpg", { layout: "constrained", width: 800, ...cf({ fit: "scale-down" }) }),
    image("avatar", "avatar", "astronaut.jpg", { layout: "fixed", width: 128, height: 128, ...cf({ gravity: "face" }) }),
    image("avatar-off-centre", "avatar", "masked.jpg", { layout: "fixed", width: 96, height: 96, ...cf({ gravity: "face" }) }),
    image("quality", "operation", "hero.jpg", { ...fixed, ...cf({ quality: 60 }) }),
    image("format-webp", "operation", "hero.jpg", { ...fixed, ...cf({ format: "webp" }) }),
    image("format-avif", "operation", "hero.jpg", { ...fixed, ...cf({ format: "avif" }) }),
    image("format-jpg", "operation", "hero.jpg", { ...fixed, ...cf({ format: "jpg" }) }),
    image("format-png", "operation", "astronaut.jpg", { ...fixed, ...cf({ format: "png" }) }),
    image("dpr", "operation", "hero.jpg", { ...fixed, ...cf({ dpr: 2 }) }),
    image("contain", "operation", "hero.jpg", { layout: "fixed", width: 300, height: 300, ...cf({ fit: "contain" }) }),
    image("crop", "operation", "astronaut.jpg", { layout: "fixed", width: 400, height: 200, ...cf({ fit: "crop" }) }),
    image("pad", "operation", "hero.jpg", { layout: "fixed", width: 300, height: 300, ...cf({ fit: "pad", background: "#ff0000" }) }),
    image("gravity-left", "operation", "hero.jpg", { layout: "fixed", width: 200, height: 300, ...cf({ gravity: "left" }) }),
    image("gravity-point", "operation", "hero.jpg", { layout: "fixed", width: 200, height: 300, ...cf({ gravity: "0.3x0.6" }) }),
    image("gravity-auto", "operation", "hero.jpg", { layout: "fixed", width: 200, height: 300, ...cf({ gravity: "auto" }) }),
    image("effects", "operation", "hero.jpg", {
      ...fixed,
      ...cf({ blur: 5, brightness: 1.2, contrast: 1.1, gamma: 0.8, sharpen: 1, saturation: 0.5 }),
    }),
    image("rotate", "operation", "hero.jpg", { ...fixed, ...cf({ rotate: 90 }) }),
    image("metadata-anim-onerror", "operation", "hero.jpg", {
      ...fixed,
      ...cf({ metadata: "none", anim: false, onerror: "redirect", compression: "fast" }),
    }),
  ];
}

// Next.js <Image>: its srcset rule (getWidths in next/dist/shared/lib/get-img-props.js, the
// default deviceSizes and Next 16's default imageSizes) around each documented loader.
const DEVICE_SIZES = [640, 750, 828, 1080, 1200, 1920, 2048, 3840];
const IMAGE_SIZES = [32, 48, 64, 96, 128, 256, 384];
const ALL_SIZES = [...DEVICE_SIZES, ...IMAGE_SIZES].sort((a, b) => a - b);

function nextImage(loader, name, kind, source, { width, sizes, quality }) {
  let widths;
  let descriptor;
  if (sizes) {
    const percents = [...sizes.matchAll(/(^|\s)(1?\d?\d)vw/g)].map((m) => Number.parseInt(m[2], 10));
    const smallest = Math.min(...percents) * 0.01;
    widths = ALL_SIZES.filter((s) => s >= DEVICE_SIZES[0] * smallest);
    descriptor = (w) => `${w}w`;
  } else {
    widths = [...new Set([width, width * 2].map((w) => ALL_SIZES.find((p) => p >= w) || ALL_SIZES.at(-1)))];
    descriptor = (_, i) => `${i + 1}x`;
  }
  const urls = widths.map((w) => loader({ src: path(source), width: w, quality }));
  return {
    name,
    kind,
    source,
    alt: name,
    src: urls.at(-1),
    srcset: urls.map((url, i) => `${url} ${descriptor(widths[i], i)}`).join(", "),
    sizes,
    width,
    loading: "lazy",
  };
}

// nextjs.org/docs/app/api-reference/config/next-config-js/images, "Cloudflare" (Next.js 16.4),
// with the site's own domain for https://example.com: the src starts with "/", so the source
// comes after a double slash.
function nextDocsLoader({ src, width, quality }) {
  const params = [`width=${width}`, `quality=${quality || 75}`, "format=auto"];
  return `/cdn-cgi/image/${params.join(",")}/${src}`;
}

// developers.cloudflare.com/images/transform-images/integrate-with-frameworks/, the production branch.
const normalizeSrc = (src) => (src.startsWith("/") ? src.slice(1) : src);
function cloudflareDocsLoader({ src, width, quality }) {
  const params = [`width=${width}`];
  if (quality) {
    params.push(`quality=${quality}`);
  }
  return `/cdn-cgi/image/${params.join(",")}/${normalizeSrc(src)}`;
}

function nextLoaders(loader) {
  return [
    nextImage(loader, "hero", "responsive", "hero.jpg", { sizes: "100vw" }),
    nextImage(loader, "hero-small-source", "responsive", "astronaut.jpg", { sizes: "100vw" }),
    nextImage(loader, "half", "responsive", "hero.jpg", { sizes: "(max-width: 768px) 100vw, 50vw" }),
    nextImage(loader, "fixed", "operation", "astronaut.jpg", { width: 96 }),
    nextImage(loader, "quality", "operation", "hero.jpg", { width: 384, quality: 60 }),
  ];
}

// Nuxt Image: $img.getSizes, what <NuxtImg sizes=...> and <NuxtPicture> render, with the provider
// configured as `image: {provider: "cloudflare"}` in nuxt.config; the default screens and two wider
// ones a site with full-width heroes adds (image.screens).
function nuxt() {
  const $img = createImage({
    providers: { cloudflare: { setup: nuxtCloudflare, defaults: { baseURL: "/" } } },
    provider: "cloudflare",
    presets: {},
    screens: { xs: 320, sm: 640, md: 768, lg: 1024, xl: 1280, xxl: 1536, "2xl": 1536, qhd: 2560, uhd: 3008 },
    densities: [1, 2],
    domains: [],
    alias: {},
  });
  const image = (name, kind, source, { sizes, densities, ...modifiers }) => {
    const { srcset, sizes: sizesAttribute, src } = $img.getSizes(path(source), { sizes, densities, modifiers });
    return {
      name,
      kind,
      source,
      alt: name,
      src,
      srcset,
      sizes: sizesAttribute,
      width: modifiers.width,
      height: modifiers.height,
      loading: "lazy",
    };
  };
  const fixed = { width: 320, height: 240, densities: "x1 x2" };
  const hero = "100vw sm:100vw md:100vw lg:100vw xl:100vw 2xl:100vw qhd:100vw uhd:100vw";
  return [
    image("hero", "responsive", "hero.jpg", { sizes: hero }),
    image("hero-small-source", "responsive", "astronaut.jpg", { sizes: "100vw sm:50vw lg:800px" }),
    image("avatar", "avatar", "astronaut.jpg", { width: 128, height: 128, fit: "cover", gravity: "face", densities: "x1 x2" }),
    image("avatar-off-centre", "avatar", "masked.jpg", { width: 96, height: 96, fit: "cover", gravity: "face", densities: "x1 x2" }),
    image("quality", "operation", "hero.jpg", { ...fixed, quality: 60 }),
    image("format-auto", "operation", "hero.jpg", { ...fixed, format: "auto" }),
    image("format-webp", "operation", "hero.jpg", { ...fixed, format: "webp" }),
    image("format-jpg", "operation", "hero.jpg", { ...fixed, format: "jpg" }),
    image("dpr", "operation", "hero.jpg", { width: 320, height: 240, dpr: 2, densities: "x1" }),
    image("fit-cover", "operation", "hero.jpg", { ...fixed, fit: "cover" }),
    image("fit-contain", "operation", "hero.jpg", { width: 300, height: 300, fit: "contain", densities: "x1 x2" }),
    image("fit-fill", "operation", "astronaut.jpg", { width: 800, height: 600, fit: "fill", densities: "x1" }),
    image("fit-inside", "operation", "hero.jpg", { width: 300, height: 300, fit: "inside", densities: "x1" }),
    image("fit-outside", "operation", "astronaut.jpg", { width: 400, height: 200, fit: "outside", densities: "x1" }),
    image("gravity-auto", "operation", "hero.jpg", { width: 200, height: 300, fit: "cover", gravity: "auto", densities: "x1" }),
    image("gravity-side", "operation", "hero.jpg", { width: 200, height: 300, fit: "cover", gravity: "side", densities: "x1" }),
    image("sharpen", "operation", "hero.jpg", { ...fixed, sharpen: 1 }),
  ];
}

// Astro: getImage (what <Image> and <Picture> call) with @astrojs/cloudflare's image service, as
// `adapter: cloudflare({imageService: "cloudflare"})` configures it for a build. Photos are imported
// (`import hero from "../photos/hero.jpg"`): their metadata is what Vite's asset import gives.
async function astro() {
  globalThis.astroAsset = { imageService: astroCloudflare };
  const imageConfig = { service: { entrypoint: "@astrojs/cloudflare/image-service", config: {} }, domains: [], remotePatterns: [] };
  const imported = (name) => ({ src: path(name), width: SOURCES[name][0], height: SOURCES[name][1], format: "jpg" });
  const image = async (name, kind, source, options) => {
    const result = await getImage({ src: imported(source), alt: name, ...options }, imageConfig);
    const { attributes } = result;
    return {
      name,
      kind,
      source,
      alt: name,
      src: result.src,
      srcset: result.srcSet.attribute,
      sizes: attributes.sizes,
      width: attributes.width,
      height: attributes.height,
      loading: attributes.loading,
    };
  };
  const fixed = { width: 320, height: 240, layout: "fixed" };
  return [
    await image("hero", "responsive", "hero.jpg", { layout: "full-width" }),
    await image("hero-constrained", "responsive", "astronaut.jpg", { width: 800, layout: "constrained" }),
    await image("avatar", "operation", "astronaut.jpg", { width: 128, height: 128, fit: "cover", layout: "fixed" }),
    await image("quality-number", "operation", "hero.jpg", { ...fixed, quality: 60 }),
    await image("quality-mid", "operation", "hero.jpg", { ...fixed, quality: "mid" }),
    await image("format-avif", "operation", "hero.jpg", { ...fixed, format: "avif" }),
    await image("format-png", "operation", "astronaut.jpg", { ...fixed, format: "png" }),
    await image("format-jpg", "operation", "hero.jpg", { ...fixed, format: "jpg" }),
    await image("densities", "operation", "hero.jpg", { width: 320, height: 240, densities: [1, 2] }),
    await image("fit-contain", "operation", "hero.jpg", { width: 300, height: 300, fit: "contain", layout: "fixed" }),
    await image("fit-fill", "operation", "hero.jpg", { ...fixed, fit: "fill" }),
    await image("fit-scale-down", "operation", "astronaut.jpg", { width: 800, height: 600, fit: "scale-down" }),
  ];
}

const output = {
  unpic: unpic(),
  "next-docs-loader": nextLoaders(nextDocsLoader),
  "cloudflare-docs-loader": nextLoaders(cloudflareDocsLoader),
  nuxt: nuxt(),
  astro: await astro(),
};
process.stdout.write(`${JSON.stringify(output, null, 1)}\n`);
