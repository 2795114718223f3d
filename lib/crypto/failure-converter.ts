import { DefaultFailureConverter } from '@temporalio/common';

/**
 * Loaded by path (DataConverter.failureConverterPath), because the workflow sandbox needs
 * it too: a failure's message and stack trace move into an encoded payload, which the
 * payload codec then encrypts, instead of sitting in plain text in the history. The
 * workflow bundles (worker/build-bundle.ts, the tests' global set-up) name this module.
 */
export const failureConverter = new DefaultFailureConverter({ encodeCommonAttributes: true });
