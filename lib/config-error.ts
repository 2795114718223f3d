/** A setting that is missing, malformed or contradicts another: the process refuses to start and names it. */
export class ConfigError extends Error {}
