// @ts-check
/**
 * The console's Vite build (scripts/console-build.ts runs it; `npx vite build console` works too). No plugin: Vite 8
 * transforms TSX itself (oxc), with React's automatic JSX runtime. The page is served under a
 * Content-Security-Policy of `default-src 'self'` without inline script or style (api/routes/console-assets.ts),
 * so nothing is inlined: no data: assets, no module-preload polyfill.
 * @type {import('vite').UserConfig}
 */
export default {
  base: '/console/',
  publicDir: false,
  oxc: { jsx: { runtime: 'automatic', importSource: 'react' } },
  build: {
    outDir: 'dist',
    assetsDir: 'assets',
    target: 'es2022',
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    cssCodeSplit: false,
    reportCompressedSize: false,
    rolldownOptions: {
      // TanStack Query marks its modules "use client" (for React Server Components), which a browser bundle has no use for.
      onwarn(warning, warn) {
        if (warning.code !== 'MODULE_LEVEL_DIRECTIVE') warn(warning);
      },
    },
  },
};
