import { ApiProperty } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { ArrayMaxSize, ArrayMinSize, IsArray, ValidateNested, IsObject } from 'class-validator';
import { JobRequestDto } from '../../jobs/dto/job-spec';
import { MAX_JOBS_PER_REQUEST } from '../../runs/dto/submit-run.dto';

export class AddJobsDto {
  @ApiProperty({
    type: () => JobRequestDto,
    isArray: true,
    minItems: 1,
    maxItems: MAX_JOBS_PER_REQUEST,
    description:
      'Jobs to add: 1 to 10,000 entries, and at most 10,000 jobs once replicas are expanded; the answer lists them ' +
      'all. No `group_ref` here.',
  })
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(MAX_JOBS_PER_REQUEST)
  // Each entry an object: an array entry would pass the nested validation (it is iterated) and reach the service.
  @IsObject({ each: true })
  @ValidateNested({ each: true })
  @Type(() => JobRequestDto)
  jobs!: JobRequestDto[];
}
