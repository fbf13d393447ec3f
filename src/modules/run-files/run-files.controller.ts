import { Controller, Get } from '@nestjs/common';
import { ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { Access } from '../../common/auth/principal';
import { RUN_FILE_SCHEMA } from './run-file.schema';

@ApiTags('runs')
@Controller('api/v1/schemas')
@Access('public')
export class RunFilesController {
  /**
   * The JSON Schema (draft-07) of a run file, the YAML `runplane apply -f` reads: the CLI validates a file against
   * the schema of the server it submits to, so every error is reported with its line and column before anything is
   * sent. Public: it holds nothing of any project.
   */
  @Get('run-file')
  @ApiOkResponse({
    description: 'A JSON Schema (draft-07) document.',
    schema: { type: 'object', additionalProperties: true },
  })
  runFile(): typeof RUN_FILE_SCHEMA {
    return RUN_FILE_SCHEMA;
  }
}
