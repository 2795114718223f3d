import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { hasZodFastifySchemaValidationErrors } from '@fastify/type-provider-zod';
import { DomainError } from '../../lib/errors';
import { ApiError, fromDomainError } from '../http-errors';

/** Fastify's own client errors, mapped to the contract's envelope (docs/contract.md). */
const FASTIFY_CLIENT_ERRORS: Record<string, (err: FastifyError) => ApiError> = {
  FST_ERR_CTP_INVALID_JSON_BODY: () => new ApiError(400, 'invalid_request', 'body: malformed JSON'),
  FST_ERR_CTP_EMPTY_JSON_BODY: () => new ApiError(400, 'invalid_request', "body: empty, but Content-Type is 'application/json'"),
  FST_ERR_CTP_BODY_TOO_LARGE: () => new ApiError(413, 'payload_too_large', 'body: larger than this endpoint accepts'),
  FST_ERR_CTP_INVALID_MEDIA_TYPE: () => new ApiError(415, 'unsupported_media_type', "Content-Type: this endpoint accepts 'application/json'"),
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: () => new ApiError(400, 'invalid_request', 'Content-Length: does not match the body'),
  FST_ERR_CTP_INVALID_TYPE: () => new ApiError(400, 'invalid_request', 'Content-Type: malformed'),
  FST_ERR_VALIDATION: (err) => new ApiError(400, 'invalid_request', err.message),
  // Raised by the router before any route runs (see frameworkErrors below).
  FST_ERR_BAD_URL: () => new ApiError(400, 'invalid_request', 'path: malformed percent-encoding'),
  FST_ERR_MAX_PARAM_LENGTH: () => new ApiError(414, 'uri_too_long', 'path: a path parameter is longer than this server accepts'),
  FST_ERR_ASYNC_CONSTRAINT: () => new ApiError(400, 'invalid_request', 'request: matches no route constraint'),
  // @fastify/multipart: a multipart Content-Type without its boundary, or a body that is not the multipart it claims.
  FST_INVALID_JSON_FIELD_ERROR: () => new ApiError(400, 'invalid_request', 'body: a multipart field declared as JSON is not valid JSON'),
  FST_INVALID_MULTIPART_CONTENT_TYPE: () => new ApiError(415, 'unsupported_media_type', "Content-Type: this endpoint accepts 'multipart/form-data'"),
};

/**
 * The error code of a client error nothing above names: its own code by status
 * (RFC 9110's reason phrase in snake_case), never a blanket `invalid_request`, so a
 * client can branch on it. 400 keeps the contract's `invalid_request`.
 */
const STATUS_ERROR_CODES: Record<number, string> = {
  400: 'invalid_request',
  404: 'not_found',
  405: 'method_not_allowed',
  406: 'not_acceptable',
  408: 'request_timeout',
  411: 'length_required',
  413: 'payload_too_large',
  414: 'uri_too_long',
  415: 'unsupported_media_type',
  429: 'rate_limited',
  431: 'request_header_fields_too_large',
};

export function errorCodeForStatus(status: number): string {
  return STATUS_ERROR_CODES[status] ?? (STATUS_CODES[status] ?? 'client_error').toLowerCase().replace(/[^a-z0-9]+/g, '_');
}

function describeValidation(err: FastifyError): string {
  const issues = (err.validation ?? []).map((v) => {
    const where = [err.validationContext, ...String(v.instancePath ?? '').split('/').filter(Boolean)].join('.');
    return `${where}: ${v.message ?? 'invalid'}`;
  });
  return issues.join('; ') || 'request failed validation';
}

/** Any thrown value as the contract's error (docs/contract.md); 5xx bodies stay generic and the details go to the log. */
function toApiError(err: FastifyError, request: FastifyRequest): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof DomainError) return fromDomainError(err);
  if (hasZodFastifySchemaValidationErrors(err)) return new ApiError(400, 'invalid_request', describeValidation(err));
  if (err.code && FASTIFY_CLIENT_ERRORS[err.code]) return FASTIFY_CLIENT_ERRORS[err.code](err);
  if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
    request.log.info({ err }, 'client error');
    return new ApiError(err.statusCode, errorCodeForStatus(err.statusCode), err.message);
  }
  request.log.error({ err }, 'unhandled error');
  return new ApiError(500, 'internal_error', `An internal error occurred; quote request id ${request.id} to support`);
}

function sendApiError(reply: FastifyReply, apiError: ApiError) {
  for (const [name, value] of Object.entries(apiError.headers)) reply.header(name, value);
  return reply.code(apiError.status).send(apiError.body());
}

/**
 * Fastify's `frameworkErrors`: errors the router raises before any route (and so before
 * the error handler) runs, e.g. a path with malformed percent-encoding.
 */
export function frameworkErrors(err: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  reply.header('X-Request-Id', request.id);
  void sendApiError(reply, toApiError(err, request));
}

/**
 * Fastify's `clientErrorHandler`: what Node's HTTP parser refuses before Fastify sees a
 * request (headers over the limit, a malformed request line, a slow client) still gets
 * the `{error, message}` envelope, written on the raw socket, which is then closed.
 */
export function clientErrorHandler(err: NodeJS.ErrnoException, socket: Socket): void {
  // A reset connection is gone: there is nobody to answer.
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  let status = 400;
  let message = `request: malformed HTTP (${err.code ?? 'parse error'})`;
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    status = 431;
    message = 'headers: larger than this server accepts';
  } else if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    status = 408;
    message = 'request: not received in time';
  } else if (err.code === 'HPE_UNEXPECTED_CONTENT_LENGTH' || err.code === 'HPE_INVALID_CONTENT_LENGTH') {
    message = 'Content-Length: malformed';
  }
  const body = JSON.stringify({ error: errorCodeForStatus(status), message });
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}

/** Maps every error to `{error, message, ...extra}`. */
export const errorsPlugin = fp(async (app: FastifyInstance) => {
  app.setErrorHandler((err: FastifyError, request, reply) => sendApiError(reply, toApiError(err, request)));

  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0];
    return reply.code(404).send({ error: 'not_found', message: `No route ${request.method} ${path}` });
  });
});
