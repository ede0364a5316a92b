// An EventSource in a real headless Chromium on the watch route: the snapshot arrives, then
// a stock change made from outside arrives as an event whose id is its sequence.
//
// Usage: node eventsource.cjs HTTP_BASE
const {fail, setStock, launchChromium, run} = require('./common.cjs');

run(async () => {
  const [base] = process.argv.slice(2);
  await setStock(base, 'es-sku', 1);

  const browser = await launchChromium();
  try {
    const page = await browser.newPage();
    await page.goto(`${base}/healthz`);
    await page.evaluate(() => {
      window.events = [];
      const source = new EventSource('/v1/stock:watch?sku=es-sku');
      source.onmessage = (e) => window.events.push({id: e.lastEventId, data: JSON.parse(e.data)});
    });
    await page.waitForFunction(
        () => window.events.some((e) => e.data.kind === 'KIND_SNAPSHOT_END'), {timeout: 10000});
    await setStock(base, 'es-sku', 7);
    await page.waitForFunction(
        () => window.events.some((e) => e.data.kind === 'KIND_CHANGE'), {timeout: 10000});
    const events = await page.evaluate(() => window.events);
    const change = events.find((e) => e.data.kind === 'KIND_CHANGE');
    if (change.data.level.onHand !== '7') fail(`change: ${JSON.stringify(change)}`);
    if (change.id !== change.data.sequence) fail(`event id ${change.id} is not the sequence`);
    console.log(`eventsource: ${events.length} events, change at sequence ${change.id}`);
  } finally {
    await browser.close();
  }
});
