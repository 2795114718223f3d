export const ceilingActivities = {
  async attempt(): Promise<void> {},
  async outcome(): Promise<void> {},
};
export type CeilingActivities = typeof ceilingActivities;
