/**
 * The one error family of the service. Thrown anywhere below the routes, mapped to the
 * spec's envelope `{error, message, ...extra}` by the API's error handler.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'ApiError';
  }

  body(): Record<string, unknown> {
    return { error: this.code, message: this.message, ...this.extra };
  }
}

export const notFound = (what: string, id: string) => new ApiError(404, 'not_found', `No ${what} with id '${id}' in this workspace`);
export const invalidRequest = (message: string) => new ApiError(400, 'invalid_request', message);
