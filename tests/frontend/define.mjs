// A Node module hook: what Vite's `define` does when Astro builds a site, for the one file that needs
// it. @astrojs/cloudflare's image service reads import.meta.env.BASE_URL, which exists only in
// Vite-built code; a site at the domain's root has "/" there.
export async function load(url, context, nextLoad) {
  const result = await nextLoad(url, context);
  if (url.includes("/@astrojs/cloudflare/dist/entrypoints/image-service-external.js")) {
    return { ...result, source: String(result.source).replaceAll("import.meta.env.BASE_URL", '"/"') };
  }
  return result;
}
