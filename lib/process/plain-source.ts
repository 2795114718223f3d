/**
 * Functions written once as plain JavaScript source, for the code of worker threads (the model and speech threads
 * are plain JS evaluated with `new Worker(source, { eval: true })`, so they run under tsx, Jest and a build alike),
 * and defined from the same text on the main thread: one copy of each loop, not a TypeScript one to keep in step.
 * `source` is always a constant of this code base, never input.
 */
export function definedBy<T>(source: string, name: string): T {
  return new Function(`'use strict';\n${source}\nreturn ${name};`)() as T;
}
