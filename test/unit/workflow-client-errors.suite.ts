import { WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { ApiError, asApiError } from '../../api/http-errors';
import { apiErrorOf } from '../../app/temporal-clients/conversations';
import { CONVERSATION_CLOSED } from '../../workflows/conversation';

describe('workflow failures become API errors by their type, never their text', () => {
  test('a rejected update of type conversation_closed is 409 conversation_closed', () => {
    const err = asApiError(apiErrorOf(new WorkflowUpdateFailedError('update failed', ApplicationFailure.create({ type: CONVERSATION_CLOSED, message: 'anything at all' }))));
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 409, code: 'conversation_closed' });
  });

  test('a failure whose message mentions conversation_closed but whose type differs stays what it was', () => {
    const original = new WorkflowUpdateFailedError('update failed', ApplicationFailure.create({ type: 'Other', message: 'conversation_closed' }));
    expect(apiErrorOf(original)).toBe(original);
    const plain = new Error('conversation_closed');
    expect(apiErrorOf(plain)).toBe(plain);
  });
});
