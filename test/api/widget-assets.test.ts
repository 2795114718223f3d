import fs from 'node:fs';
import Fastify from 'fastify';
import { widgetAssetRoutes } from '../../api/routes/widget-assets';

/** The static files the widget needs: itself, and LiveKit's browser SDK for calls on transport 'livekit'. */
describe('widget assets', () => {
  test("GET /widget/livekit-client.js serves livekit-client's UMD build (global LivekitClient) as JavaScript", async () => {
    const app = Fastify();
    await app.register(widgetAssetRoutes);
    try {
      const res = await app.inject({ method: 'GET', url: '/widget/livekit-client.js' });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toBe('application/javascript; charset=utf-8');
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.body).toBe(fs.readFileSync(require.resolve('livekit-client'), 'utf8'));
      // The UMD wrapper that defines the global the widget reads.
      expect(res.body.slice(0, 400)).toContain('.LivekitClient={}');
    } finally {
      await app.close();
    }
  });
});
