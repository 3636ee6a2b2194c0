import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { type Gate, type Price, centsOrUnits, creditsOrUnits, free, reportCost } from '@stipend-mcp/stipend';
import { z } from 'zod';

/** The most hours hourly forecasts. */
export const MAX_HOURS = 24;

/** What an hourly forecast of hours costs in quota units: one per started 6 hours. */
export function unitsFor(hours: number): number {
  return Math.floor((hours + 5) / 6);
}

/**
 * The example's price table, examples/paidtools's: echo is free, forecast
 * costs 5 cents (or a quota unit), history 20 cents (or two units), hourly
 * a cent an hour (or a unit per 6 hours), which it reports with reportCost,
 * so its price is its most: 24 hours. All are charged on success: a call
 * whose tool fails is not charged.
 */
export const PRICES: Readonly<Record<string, Price>> = {
  echo: free(),
  forecast: creditsOrUnits(5, 'USD', 1),
  history: creditsOrUnits(20, 'USD', 2),
  hourly: creditsOrUnits(MAX_HOURS, 'USD', unitsFor(MAX_HOURS)),
};

/**
 * Builds the example MCP server. With a gate every tools/call is charged
 * through it; without one it serves the same tools ungated (for the
 * benchmark). The made-up weather is the Go example's, number for number.
 */
export function newServer(gate?: Gate): McpServer {
  const server = new McpServer({ name: 'paidtools-ts', version: '1.0.0' });
  gate?.attach(server);
  server.registerTool(
    'echo',
    {
      description: 'Free: sends the text back.',
      inputSchema: { text: z.string().describe('the text to send back') },
      outputSchema: { text: z.string() },
    },
    async ({ text }) => answer({ text }),
  );
  server.registerTool(
    'forecast',
    {
      description: "Paid (5 cents or 1 quota unit): tomorrow's weather for a city.",
      inputSchema: { city: z.string().describe('the city to forecast') },
      outputSchema: { city: z.string(), summary: z.string(), highC: z.number(), lowC: z.number(), rainChancePercent: z.number() },
    },
    async ({ city }) => {
      if (city === '') {
        throw new Error('city is required');
      }
      const n = seed(city);
      const summaries = ['sunny', 'cloudy', 'showers', 'windy', 'snow'];
      const high = (n % 30) - 5;
      return answer({ city, summary: summaries[n % summaries.length] ?? '', highC: high, lowC: high - (n % 8) - 2, rainChancePercent: n % 101 });
    },
  );
  server.registerTool(
    'history',
    {
      description: "Paid (20 cents or 2 quota units): a city's climate in a past year.",
      inputSchema: { city: z.string().describe('the city'), year: z.number().int().describe('the year, 1950 to 2025') },
      outputSchema: { city: z.string(), year: z.number(), meanTempC: z.number(), rainMM: z.number() },
    },
    async ({ city, year }) => {
      if (city === '' || year < 1950 || year > 2025) {
        throw new Error('city is required and year must be 1950 to 2025');
      }
      const n = seed(`${city}/${year}`);
      return answer({ city, year, meanTempC: (n % 25) - 2, rainMM: 300 + (n % 1500) });
    },
  );
  server.registerTool(
    'hourly',
    {
      description:
        'Paid by the hour (a cent an hour, or a quota unit per 6 hours; at most 24 hours): ' +
        "a city's temperature for the next hours. Fails, and is not charged, for hours outside 1 to 24.",
      inputSchema: {
        city: z.string().describe('the city to forecast'),
        hours: z.number().int().describe('how many hours ahead, 1 to 24 (a cent an hour)'),
      },
      outputSchema: { city: z.string(), hours: z.array(z.object({ hour: z.number(), tempC: z.number() })) },
    },
    async ({ city, hours }, extra) => {
      if (city === '' || hours < 1 || hours > MAX_HOURS) {
        throw new Error(`city is required and hours must be 1 to ${MAX_HOURS}`);
      }
      const n = seed(city);
      const out = Array.from({ length: hours }, (_, h) => ({ hour: h + 1, tempC: (n % 30) - 5 + Math.floor((h % 12) / 2) }));
      // What this call really cost: the gate charges it instead of the price.
      reportCost(extra, centsOrUnits(hours, 'USD', unitsFor(hours)));
      return answer({ city, hours: out });
    },
  );
  return server;
}

/** A tool result: the structured content, and the same as JSON text for clients that read only text. */
function answer<T extends Record<string, unknown>>(out: T): { content: [{ type: 'text'; text: string }]; structuredContent: T } {
  return { content: [{ type: 'text', text: JSON.stringify(out) }], structuredContent: out };
}

/** The 32-bit FNV-1a hash of s's UTF-8 bytes, which makes the made-up weather stable for a given input. */
export function seed(s: string): number {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(s, 'utf8')) {
    h = Math.imul(h ^ b, 0x01000193) >>> 0;
  }
  return h;
}
