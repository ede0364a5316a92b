// Swagger UI in a real headless Chromium: loads /swaggerui/, opens POST /v1/reservations,
// "Try it out" with a body, "Execute", and checks the response shown (201, a reservation id)
// and that the reservation exists on the server. Keeps a screenshot.
//
// Usage: node swagger_try_it_out.cjs HTTP_BASE SCREENSHOT_PATH
const {fail, setStock, launchChromium, run} = require('./common.cjs');

run(async () => {
  const [base, screenshot] = process.argv.slice(2);

  await setStock(base, 'browser-sku', 5);

  const browser = await launchChromium();
  try {
    const page = await browser.newPage();
    await page.setViewport({width: 1280, height: 1600});
    await page.goto(`${base}/swaggerui/`, {waitUntil: 'networkidle0', timeout: 30000});
    const op = '#operations-InventoryService-InventoryService_Reserve';
    await page.waitForSelector(op, {timeout: 20000});
    await page.click(`${op} .opblock-summary`);
    await page.waitForSelector(`${op} .try-out__btn`, {timeout: 10000});
    await page.click(`${op} .try-out__btn`);
    const textarea = `${op} textarea.body-param__text`;
    await page.waitForSelector(textarea, {timeout: 10000});
    // Replace the example body the way typing would (React listens for input events).
    await page.$eval(textarea, (el, value) => {
      const setter = Object.getOwnPropertyDescriptor(HTMLTextAreaElement.prototype, 'value').set;
      setter.call(el, value);
      el.dispatchEvent(new Event('input', {bubbles: true}));
    }, '{"lines":[{"sku":"browser-sku","quantity":"2"}]}');
    await page.click(`${op} .execute`);
    const statusCell = `${op} .live-responses-table tr.response td.response-col_status`;
    try {
      await page.waitForSelector(statusCell, {timeout: 15000});
    } catch (e) {
      await page.screenshot({path: screenshot, fullPage: true});
      const html = await page.$eval(op, (el) => el.innerText);
      fail(`no response shown (screenshot ${screenshot}); the operation shows:\n${html.slice(0, 3000)}`);
    }
    const status = (await page.$eval(statusCell, (e) => e.textContent)).trim();
    const body = await page.$eval(`${op} .live-responses-table .response-col_description pre`,
                                  (e) => e.textContent);
    await page.screenshot({path: screenshot, fullPage: true});
    if (!status.startsWith('201')) fail(`status shown: ${status}; body: ${body}`);
    const id = JSON.parse(body).reservation.reservationId;
    if (!id) fail(`no reservation id in ${body}`);
    const got = await fetch(`${base}/v1/reservations/${id}`);
    const reservation = await got.json();
    if (got.status !== 200 || reservation.state !== 'RESERVATION_STATE_HELD') {
      fail(`reservation ${id}: ${got.status} ${JSON.stringify(reservation)}`);
    }
    console.log(`swagger: reserved ${id} through Try it out (${status}); screenshot ${screenshot}`);
  } finally {
    await browser.close();
  }
});
