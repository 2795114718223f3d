import type { FastifyError, FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { hasZodFastifySchemaValidationErrors } from '@fastify/type-provider-zod';
import { ApiError } from '../../core/errors';

/** Fastify's own client errors, mapped to the spec's envelope. */
const FASTIFY_CLIENT_ERRORS: Record<string, (err: FastifyError) => ApiError> = {
  FST_ERR_CTP_INVALID_JSON_BODY: () => new ApiError(400, 'invalid_request', 'body: malformed JSON'),
  FST_ERR_CTP_EMPTY_JSON_BODY: () => new ApiError(400, 'invalid_request', "body: empty, but Content-Type is 'application/json'"),
  FST_ERR_CTP_BODY_TOO_LARGE: () => new ApiError(413, 'payload_too_large', 'body: larger than this endpoint accepts'),
  FST_ERR_CTP_INVALID_MEDIA_TYPE: () => new ApiError(415, 'unsupported_media_type', "Content-Type: this endpoint accepts 'application/json'"),
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: () => new ApiError(400, 'invalid_request', 'Content-Length: does not match the body'),
  FST_ERR_CTP_INVALID_TYPE: () => new ApiError(400, 'invalid_request', 'Content-Type: malformed'),
  FST_ERR_VALIDATION: (err) => new ApiError(400, 'invalid_request', err.message),
};

function describeValidation(err: FastifyError): string {
  const issues = (err.validation ?? []).map((v) => {
    const where = [err.validationContext, ...String(v.instancePath ?? '').split('/').filter(Boolean)].join('.');
    return `${where}: ${v.message ?? 'invalid'}`;
  });
  return issues.join('; ') || 'request failed validation';
}

/** Maps every error to `{error, message, ...extra}`; 5xx bodies stay generic and the details go to the log. */
export const errorsPlugin = fp(async (app: FastifyInstance) => {
  app.setErrorHandler((err: FastifyError, request, reply) => {
    let apiError: ApiError;
    if (err instanceof ApiError) {
      apiError = err;
    } else if (hasZodFastifySchemaValidationErrors(err)) {
      apiError = new ApiError(400, 'invalid_request', describeValidation(err));
    } else if (err.code && FASTIFY_CLIENT_ERRORS[err.code]) {
      apiError = FASTIFY_CLIENT_ERRORS[err.code](err);
    } else if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
      request.log.info({ err }, 'client error');
      apiError = new ApiError(err.statusCode, 'invalid_request', err.message);
    } else {
      request.log.error({ err }, 'unhandled error');
      apiError = new ApiError(500, 'internal_error', `An internal error occurred; quote request id ${request.id} to support`);
    }
    for (const [name, value] of Object.entries(apiError.headers)) reply.header(name, value);
    return reply.code(apiError.status).send(apiError.body());
  });

  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0];
    return reply.code(404).send({ error: 'not_found', message: `No route ${request.method} ${path}` });
  });
});
