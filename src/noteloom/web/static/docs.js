// /api/docs: the vendored Swagger UI, signed in like every page; "Try it out" requests
// carry the session header (the spec itself is fetched with it too).
"use strict";

NL.start(() => {
  window.ui = SwaggerUIBundle({
    url: "/api/v1/openapi.json",
    dom_id: "#swagger-ui",
    validatorUrl: null,            // no calls to swagger.io
    deepLinking: false,
    requestInterceptor: (req) => {
      const s = NL.session();
      if (s) req.headers[NL.HEADER] = s;
      req.credentials = "omit";
      return req;
    },
  });
});
