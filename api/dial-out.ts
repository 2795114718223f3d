import type { Services } from '../app/services';
import type { ICall } from '../db/entities';
import type { VoiceParts } from '../app/voice';
import type { Gateways } from '../app/temporal-clients';

/**
 * Places a checked dial-out call (POST /widget/call, POST /api/v1/outbound channel voice):
 * takes a slot and pays the first minute (429 concurrent_voice_limit_reached, 402
 * out_of_credits), then starts its `call:call_…` workflow; a call whose workflow could not
 * start is marked failed, so it holds no slot.
 */
export async function placeCall(
  services: Pick<Services, 'voice'>,
  gateways: Gateways,
  voice: VoiceParts | null,
  c: { workspaceId: string; siteId: string | null; conversationId: string; agentId: string; phone: string; destinationClass?: 'fixed' | 'mobile' | 'other'; creditsPerMinute?: number },
): Promise<ICall> {
  const row = await services.voice.reserveCall({ ...c, provider: voice?.telephony?.kind ?? 'none' });
  try {
    await gateways.voice.startCall({ callId: row.id, workspaceId: c.workspaceId, conversationId: c.conversationId, phone: c.phone, siteId: c.siteId });
  } catch (err) {
    await services.voice.callStatus(row.id, 'failed', { error: 'the call could not be started' });
    throw err;
  }
  return row;
}
