// Starts Swagger UI (served from the swagger-ui-bundle package, no CDN) on /openapi.json.
// It stands in for the inline script of Swagger UI's own index.html, which the page's CSP forbids.
"use strict";

window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  displayRequestDuration: true,
  validatorUrl: null, // no badge fetched from validator.swagger.io
});
