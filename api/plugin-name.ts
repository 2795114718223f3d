/** Fastify reads a plugin's name from this symbol before anything else (fastify/lib/plugin-utils.js getPluginName). */
const DISPLAY_NAME = Symbol.for('fastify.display-name');

/**
 * A route plugin (encapsulated: not through fastify-plugin, which would skip the override)
 * named for Fastify by its function name, the name Fastify gave it anyway. Without the
 * symbol, every register() first looks for a module whose exports *are* the plugin by
 * scanning require.cache, twice (registerPlugin and override), and finds none (our modules
 * export plugins by name): under Jest that cache is a proxy over ~2,300 modules, and the
 * scans cost ~330 ms of CPU per app built (40 registrations), the suite building 110+ apps.
 */
export function named<P extends (...args: never[]) => unknown>(plugin: P): P {
  (plugin as unknown as Record<symbol, string>)[DISPLAY_NAME] ??= plugin.name;
  return plugin;
}
